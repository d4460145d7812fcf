#include "common/telemetry/status_table.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/telemetry/http_client.hpp"
#include "common/telemetry/json.hpp"
#include "common/util/printable.hpp"

namespace tern::telemetry {

std::string humanBytes(double bytes) {
  static const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", bytes);
  return fmt::format("{:.2f} {}", bytes, units[u]);
}

namespace {

// The longest string a table shows from the document (a longer one is cut).
constexpr size_t kMaxShownChars = 64;

// Seconds in the unit that keeps 1-3 integer digits: link costs span microseconds to seconds.
std::string humanSeconds(double s) {
  if (s == 0.0) return "0";
  double a = std::fabs(s);
  if (a >= 1.0) return fmt::format("{:.3g}s", s);
  if (a >= 1e-3) return fmt::format("{:.3g}ms", s * 1e3);
  return fmt::format("{:.3g}us", s * 1e6);
}

}  // namespace

namespace {

// Every string from the document is shown through printable(): a status endpoint (or a worker
// name it lists) must not drive the terminal, and a name is cut so no row can be huge.
std::string text(const Json& v, const char* key) {
  return printable(jsonStringOr(v, key, "?"), kMaxShownChars);
}

std::string summary(const Json& st) {
  std::string out = fmt::format("{} {} (tern {}), state {}\n", text(st, "role"), text(st, "name"),
                                text(st, "version"), text(st, "state"));
  // A worker evaluates nothing: its accuracy is null, shown as "-".
  const Json* acc = jsonFind(st, "test_accuracy");
  std::string accuracy = acc && acc->is_number() ? fmt::format("{:.4f}", acc->get<double>()) : "-";
  out += fmt::format(
      "round {:.0f} ({:.0f} completed) after {:.1f} s   train loss {:.4f}   "
      "test accuracy {}\n",
      jsonNumberOr(st, "round", 0), jsonNumberOr(st, "rounds_completed", 0),
      jsonNumberOr(st, "time_s", 0), jsonNumberOr(st, "train_loss", 0), accuracy);
  double up = jsonNumberOr(st, "upload_bytes", 0), full = jsonNumberOr(st, "full_bytes", 0);
  std::string pct = full > 0 ? fmt::format(" ({:.2f}% of uncompressed)", 100.0 * up / full) : "";
  out += fmt::format("uploaded {}{}   downloaded {}\n", humanBytes(up), pct,
                     humanBytes(jsonNumberOr(st, "download_bytes", 0)));
  out += fmt::format(
      "workers alive {:.0f}   in last round {:.0f}   late pushes {:.0f}   "
      "rejected messages {:.0f}\n",
      jsonNumberOr(st, "alive_workers", 0), jsonNumberOr(st, "participants", 0),
      jsonNumberOr(st, "late_pushes", 0), jsonNumberOr(st, "rejected_total", 0));
  return out;
}

// "TITLE: name=n ..." for a non-empty object of counts, names in order.
std::string countsLine(const Json& st, const char* key, const char* title) {
  const Json* counts = jsonFind(st, key);
  if (!counts || !counts->is_object() || counts->empty()) return "";
  std::string out = title;
  for (const auto& [name, n] : counts->items()) {
    out += fmt::format(" {}={:.0f}", printable(name, kMaxShownChars),
                       n.is_number() ? n.get<double>() : 0.0);
  }
  return out + '\n';
}

std::string workerRow(const Json& w, size_t name_width) {
  static const Json none = Json::object();
  const Json* link = jsonFind(w, "link");
  if (!link) link = &none;
  const Json* a_member = jsonFind(w, "alive");
  const bool alive = a_member && a_member->is_boolean() && a_member->get<bool>();
  double samples = jsonNumberOr(*link, "samples", 0);
  std::string a = samples > 0 ? humanSeconds(jsonNumberOr(*link, "a_seconds", 0)) : "-";
  std::string b = samples > 0 ? humanSeconds(jsonNumberOr(*link, "b_seconds_per_packet", 0)) : "-";
  std::string r2 = samples > 0 ? fmt::format("{:.3f}", jsonNumberOr(*link, "r2", 0)) : "-";
  // The level of the worker's push in the last round ("-": none, or from a tern without it).
  const double level = jsonNumberOr(w, "level", 0);
  std::string last_t = level > 0 ? fmt::format("{:.0f}", level) : "-";
  return fmt::format(
      "{:>4.0f}  {:<{}}  {:<5}  {:>7.0f}  {:>7}  {:>6.3f}  {:>10}  {:>10}  {:>9}  {:>10}  "
      "{:>5}  {:>7.0f}\n",
      jsonNumberOr(w, "id", 0), text(w, "name"), name_width, alive ? "yes" : "no",
      jsonNumberOr(w, "cap", 0), last_t, jsonNumberOr(w, "share", 0),
      humanBytes(jsonNumberOr(w, "upload_bytes", 0)),
      humanBytes(jsonNumberOr(w, "download_bytes", 0)), a, b, r2, samples);
}

std::string workerTable(const Json& workers) {
  size_t name_width = 6;
  for (const auto& w : workers) name_width = std::max(name_width, text(w, "name").size());
  std::string out = fmt::format(
      "\n{:>4}  {:<{}}  {:<5}  {:>7}  {:>7}  {:>6}  {:>10}  {:>10}  {:>9}  {:>10}  {:>5}  "
      "{:>7}\n",
      "id", "worker", name_width, "alive", "cap", "last T", "share", "uploaded", "downloaded",
      "link a", "link b/pkt", "r2", "samples");
  for (const auto& w : workers) out += workerRow(w, name_width);
  return out;
}

}  // namespace

std::string renderStatusTable(const Json& st) {
  if (!st.is_object()) throw JsonError("the status document is not a JSON object");
  std::string out = summary(st);
  out += countsLine(st, "rejected", "rejected by reason:");
  out += countsLine(st, "counters", "counters:");
  const Json* workers = jsonFind(st, "workers");
  if (!workers || !workers->is_array() || workers->empty()) return out + "no workers known yet\n";
  return out + workerTable(*workers);
}

}  // namespace tern::telemetry

namespace tern::telemetry {

int runStatusCommand(const std::string& url, bool raw_json, double timeout_seconds,
                     std::ostream& out, std::ostream& err) {
  try {
    std::string target = url;
    HttpUrl parsed = parseHttpUrl(url);
    if (parsed.target == "/")
      target = (url.back() == '/' ? url.substr(0, url.size() - 1) : url) + "/status";
    HttpResponse r = httpGet(target, timeout_seconds);
    if (r.status != 200) {
      err << target << ": HTTP " << r.status << " " << statusReason(r.status) << '\n';
      return 1;
    }
    Json doc = parseJson(r.body);
    if (raw_json) {
      out << r.body;
      if (r.body.empty() || r.body.back() != '\n') out << '\n';
    } else {
      out << renderStatusTable(doc);
    }
    return 0;
  } catch (const std::exception& e) {
    err << "status: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace tern::telemetry
