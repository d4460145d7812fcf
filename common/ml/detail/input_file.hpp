#pragma once
// The check every data reader makes before it opens a file. A directory opens without error on
// Linux and then reads as an empty file (or fails mid-read), so "exists" is not enough: a reader
// needs a regular file to say what is wrong with it.
#include <string>

namespace tern::ml::detail {

// "" when path names a regular file (symbolic links followed), otherwise why it does not, as a
// phrase to follow the file's name: "not found", "is a directory", "is not a regular file".
std::string whyNotAFile(const std::string& path);

}  // namespace tern::ml::detail
