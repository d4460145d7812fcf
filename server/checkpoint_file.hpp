#pragma once
// Durable checkpoint files for the coordinator daemon. A checkpoint is replaced atomically: the
// bytes go to a temporary file in the same directory, which is fsynced, renamed over the old
// file, and the directory is fsynced, so after a crash the path holds either the old or the new
// checkpoint, never a torn one.
#include <optional>
#include <string>

namespace tern::server {

// Throws std::runtime_error (with the path and errno text) if any step fails.
void writeFileAtomically(const std::string& path, const std::string& bytes);
// The file's bytes, or nullopt when it does not exist. Throws on any other error.
std::optional<std::string> readFileIfExists(const std::string& path);

}  // namespace tern::server
