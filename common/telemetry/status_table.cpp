#include "common/telemetry/status_table.hpp"

#include <fmt/format.h>

#include <cmath>

#include "common/telemetry/http_client.hpp"
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

std::string renderStatusTable(const JsonValue& st) {
  st.object();  // throws unless an object
  std::string out;
  // Every string from the document is shown through printable(): a status endpoint (or a worker
  // name it lists) must not drive the terminal, and a name is cut so no row can be huge.
  auto text = [](const JsonValue& v, const char* key) {
    return printable(v.stringOr(key, "?"), kMaxShownChars);
  };
  std::string role = text(st, "role");
  out += fmt::format("{} {} (tern {}), state {}\n", role, text(st, "name"), text(st, "version"),
                     text(st, "state"));
  // A worker evaluates nothing: its accuracy is null, shown as "-".
  const JsonValue* acc = st.find("test_accuracy");
  std::string accuracy = acc && acc->isNumber() ? fmt::format("{:.4f}", acc->number()) : "-";
  out += fmt::format(
      "round {:.0f} ({:.0f} completed) after {:.1f} s   train loss {:.4f}   "
      "test accuracy {}\n",
      st.numberOr("round", 0), st.numberOr("rounds_completed", 0), st.numberOr("time_s", 0),
      st.numberOr("train_loss", 0), accuracy);
  double up = st.numberOr("upload_bytes", 0), full = st.numberOr("full_bytes", 0);
  std::string pct = full > 0 ? fmt::format(" ({:.2f}% of uncompressed)", 100.0 * up / full) : "";
  out += fmt::format("uploaded {}{}   downloaded {}\n", humanBytes(up), pct,
                     humanBytes(st.numberOr("download_bytes", 0)));
  out += fmt::format(
      "workers alive {:.0f}   in last round {:.0f}   late pushes {:.0f}   "
      "rejected messages {:.0f}\n",
      st.numberOr("alive_workers", 0), st.numberOr("participants", 0),
      st.numberOr("late_pushes", 0), st.numberOr("rejected_total", 0));
  if (auto* rej = st.find("rejected"); rej && rej->isObject() && !rej->object().empty()) {
    out += "rejected by reason:";
    for (const auto& [reason, n] : rej->object()) {
      out += fmt::format(" {}={:.0f}", printable(reason, kMaxShownChars),
                         n.isNumber() ? n.number() : 0.0);
    }
    out += '\n';
  }
  if (auto* c = st.find("counters"); c && c->isObject() && !c->object().empty()) {
    out += "counters:";
    for (const auto& [name, n] : c->object()) {
      out += fmt::format(" {}={:.0f}", printable(name, kMaxShownChars),
                         n.isNumber() ? n.number() : 0.0);
    }
    out += '\n';
  }
  auto* workers = st.find("workers");
  if (!workers || !workers->isArray() || workers->array().empty()) {
    out += "no workers known yet\n";
    return out;
  }
  size_t name_width = 6;
  for (const auto& w : workers->array()) {
    name_width = std::max(name_width, text(w, "name").size());
  }
  out += '\n';
  out += fmt::format(
      "{:>4}  {:<{}}  {:<5}  {:>7}  {:>7}  {:>6}  {:>10}  {:>10}  {:>9}  {:>10}  {:>5}  {:>7}\n",
      "id", "worker", name_width, "alive", "cap", "last T", "share", "uploaded", "downloaded",
      "link a", "link b/pkt", "r2", "samples");
  for (const auto& w : workers->array()) {
    JsonValue none;
    const JsonValue* link = w.find("link");
    if (!link) link = &none;
    bool alive = false;
    if (auto* a = w.find("alive"); a && std::holds_alternative<bool>(a->v)) alive = a->boolean();
    double samples = link->numberOr("samples", 0);
    std::string a = samples > 0 ? humanSeconds(link->numberOr("a_seconds", 0)) : "-";
    std::string b = samples > 0 ? humanSeconds(link->numberOr("b_seconds_per_packet", 0)) : "-";
    std::string r2 = samples > 0 ? fmt::format("{:.3f}", link->numberOr("r2", 0)) : "-";
    // The level of the worker's push in the last round ("-": none, or from a tern without it).
    const double level = w.numberOr("level", 0);
    std::string last_t = level > 0 ? fmt::format("{:.0f}", level) : "-";
    out += fmt::format(
        "{:>4.0f}  {:<{}}  {:<5}  {:>7.0f}  {:>7}  {:>6.3f}  {:>10}  {:>10}  {:>9}  {:>10}  "
        "{:>5}  {:>7.0f}\n",
        w.numberOr("id", 0), text(w, "name"), name_width, alive ? "yes" : "no",
        w.numberOr("cap", 0), last_t, w.numberOr("share", 0),
        humanBytes(w.numberOr("upload_bytes", 0)), humanBytes(w.numberOr("download_bytes", 0)), a,
        b, r2, samples);
  }
  return out;
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
    JsonValue doc = parseJson(r.body);
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
