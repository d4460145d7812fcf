#pragma once
// Renders a daemon's /status document as a readable plain-text table: one summary block for the
// node (round, loss, accuracy, bytes, rejections) and one row per worker (cap, share, bytes,
// fitted link model). Used by `tern-coordinator status --url ...`; tolerant of absent fields so
// it can read documents from older or newer daemons.
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>

namespace tern::telemetry {

// Throws JsonError (common/telemetry/json.hpp) when the document is not a JSON object.
std::string renderStatusTable(const nlohmann::json& status);

// `tern-coordinator status`: fetches URL (a bare "http://host:port" means its /status), prints
// the table (or the raw document when raw_json) and returns the process exit code: 0, or 1 with
// a message on err when the daemon cannot be reached or answers with something else.
int runStatusCommand(const std::string& url, bool raw_json, double timeout_seconds,
                     std::ostream& out, std::ostream& err);

// "1.23 MB" style, powers of 1000 (the metrics CSV counts bytes; this is for reading).
std::string humanBytes(double bytes);

}  // namespace tern::telemetry
