// libFuzzer target: what `tern-coordinator status` does with a /status body it fetched: the
// strict, depth-limited JSON reader and the table renderer, on arbitrary bytes. Beyond "no
// crash, no UB", a document is either refused with JsonError or rendered, and the table never
// carries a control character other than the newline (a peer must not drive the terminal).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/telemetry/json.hpp"
#include "common/telemetry/status_table.hpp"

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tern::telemetry::Json doc;
  try {
    doc = tern::telemetry::parseJson(text);
  } catch (const tern::telemetry::JsonError&) {
    return 0;
  }
  std::string table;
  try {
    table = tern::telemetry::renderStatusTable(doc);
  } catch (const tern::telemetry::JsonError&) {
    require(!doc.is_object());
    return 0;
  }
  for (char c : table) require(c == '\n' || static_cast<unsigned char>(c) >= 0x20);
  return 0;
}
