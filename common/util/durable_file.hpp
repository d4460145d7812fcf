#pragma once
// Durable files for the daemons: the coordinator's checkpoint, and the small files readers poll
// for (the bound endpoint, the HTTP URL). A file is replaced atomically: the bytes go to a
// temporary file in the same directory (mode 0600 by default), which is fsynced, renamed over the
// old file, and the directory is fsynced, so after a crash the path holds either the old or the new
// contents, never a torn file, and a reader never sees half of one.
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

// Throws std::runtime_error (with the path and errno text) if any step fails. `mode` is the new
// file's permissions (less the umask); owner-only unless a reader of another user needs it.
void writeFileAtomically(const std::string& path, const std::string& bytes, unsigned mode = 0600);
// As above, the contents handed over piece by piece: `produce` calls its sink with each piece in
// order (a file of any size in constant memory). An exception from `produce` removes the
// temporary file, leaves `path` as it was and propagates.
using ByteSink = std::function<void(std::string_view)>;
void writeFileAtomically(const std::string& path,
                         const std::function<void(const ByteSink&)>& produce, unsigned mode = 0600);
// Creates and removes PATH.tmp, the file writeFileAtomically writes first: a checkpoint that
// could never be written is found at start-up rather than when the first one falls due. Throws
// std::runtime_error (with the path and errno text) if it cannot.
void checkWritable(const std::string& path);
// The file's bytes, or nullopt when it does not exist. Throws on any other error.
std::optional<std::string> readFileIfExists(const std::string& path);

}  // namespace tern
