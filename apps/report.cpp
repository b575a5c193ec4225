#include "apps/report.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/files.hpp"

namespace troupe::app {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Round tick steps: 1, 2 or 5 times a power of ten, about `n` of them over [lo, hi].
double tick_step(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  if (raw <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string number(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 10000) return fmt::format("{:.0f}k", v / 1000);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:.3g}", v);
  return fmt::format("{:.2g}", v);
}

// A line chart of `points` (x from `x_of`), its points marked with class `cls` and a tooltip.
template <class X>
std::string line_chart(const std::string& title, const std::string& x_label, const std::vector<ReportPoint>& points,
                       X x_of, const std::string& cls, const std::string& color, const std::string& unit) {
  constexpr double W = 440, H = 230, L = 52, R = 14, T = 30, B = 38;
  std::string svg = fmt::format(R"(<svg class="chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img"><title>{}</title>)",
                                W, H, W, H, escape(title));
  svg += fmt::format(R"(<text x="{}" y="18" class="ctitle">{}</text>)", L, escape(title));
  if (points.empty()) {
    svg += fmt::format(R"(<text x="{}" y="{}" class="empty">nothing logged</text></svg>)", W / 2 - 50, H / 2);
    return svg;
  }
  double x0 = x_of(points.front()), x1 = x0, y0 = points.front().value, y1 = y0;
  for (auto& p : points) {
    x0 = std::min(x0, x_of(p)), x1 = std::max(x1, x_of(p));
    y0 = std::min(y0, p.value), y1 = std::max(y1, p.value);
  }
  if (x1 == x0) {  // one point: in the middle
    const double half = std::max(1.0, std::abs(x0) * 0.1);
    x0 -= half, x1 += half;
  }
  const double pad = (y1 - y0) * 0.08 + (y1 == y0 ? std::max(1e-3, std::abs(y1) * 0.05) : 0);
  y0 -= pad, y1 += pad;
  if (y0 < 0 && points.front().value >= 0) y0 = 0;
  const double ys = tick_step(y0, y1, 4);
  y0 = std::floor(y0 / ys) * ys, y1 = std::ceil(y1 / ys) * ys;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  for (double y = y0; y <= y1 + ys / 2; y += ys)
    svg += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{:.1f}" y="{:.1f}" class="ytick">{}</text>)",
                       L, W - R, py(y), py(y), L - 6, py(y) + 4, number(y));
  const double xs = tick_step(x0, x1, 5);
  for (double x = std::ceil(x0 / xs) * xs; x <= x1 + xs / 100; x += xs)
    svg += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" class="tick"/><text x="{:.1f}" y="{:.1f}" class="xtick">{}</text>)",
                       px(x), px(x), H - B, H - B + 4, px(x), H - B + 17, number(x));
  svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="xlabel">{}</text>)", L + (W - L - R) / 2, H - 4, escape(x_label));
  std::string line;
  for (auto& p : points) line += fmt::format("{:.1f},{:.1f} ", px(x_of(p)), py(p.value));
  svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>)", line, color);
  const double r = points.size() > 60 ? 1.6 : 3;
  for (auto& p : points)
    svg += fmt::format(R"(<circle class="{}" cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"><title>step {}, {:.1f} s: {:.4g}{}</title></circle>)",
                       cls, px(x_of(p)), py(p.value), r, color, p.step, p.seconds, p.value, unit);
  return svg + "</svg>";
}

std::string op_bars(const TraceSummary& s) {
  const std::size_t n = std::min<std::size_t>(s.op_types.size(), 12);
  if (n == 0) return "<p class=\"note\">The traced steps ran no kernels.</p>";
  constexpr double W = 900, L = 250, R = 190, row = 24;
  const double H = row * double(n) + 10;
  const double most = s.op_types.front().total_us;
  std::string svg = fmt::format(R"(<svg class="bars" viewBox="0 0 {} {}" width="{}" height="{}" role="img"><title>time per op type</title>)", W, H, W, H);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& op = s.op_types[i];
    const double y = 5 + row * double(i);
    const double w = most > 0 ? (W - L - R) * op.total_us / most : 0;
    const std::string shown = op.name.size() > 34 ? op.name.substr(0, 32) + "…" : op.name;
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" class="bname">{}</text>)", L - 8, y + 15, escape(shown));
    svg += fmt::format(R"(<rect class="op-bar" x="{}" y="{:.1f}" width="{:.1f}" height="{}" rx="3"><title>{}: {} run(s), {:.3f} ms</title></rect>)",
                       L, y + 2, std::max(w, 1.0), row - 6, escape(op.name), op.count, op.total_us / 1000);
    svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="bval">{:.2f} ms · {:.1f}% of step · {}×</text>)", L + w + 8, y + 15,
                       op.total_us / 1000, s.step_us > 0 ? 100 * op.total_us / s.step_us : 0.0, op.count);
  }
  return svg + "</svg>";
}

const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2430; background: #f4f6f9; margin: 0; }
main { max-width: 960px; margin: 0 auto; padding: 24px 20px 40px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 10px; }
.sub { color: #5b6577; margin: 0 0 18px; }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; }
.card { background: #fff; border-radius: 8px; padding: 12px 14px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
.card .k { color: #5b6577; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 22px; font-weight: 600; margin-top: 2px; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.panel { background: #fff; border-radius: 8px; padding: 8px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
svg text { font: 11px system-ui, sans-serif; fill: #4a5568; }
.ctitle { font-size: 13px; font-weight: 600; fill: #1d2430; }
.ytick { text-anchor: end; } .xtick, .xlabel { text-anchor: middle; } .bname { text-anchor: end; font-size: 12px; fill: #1d2430; }
.grid { stroke: #e6e9ef; } .tick { stroke: #9aa3b2; } .op-bar { fill: #5b8def; } .empty { fill: #9aa3b2; }
table { border-collapse: collapse; width: 100%; background: #fff; border-radius: 8px; overflow: hidden; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
td { padding: 6px 12px; border-top: 1px solid #eef0f4; } td:first-child { color: #5b6577; width: 34%; }
.note { color: #5b6577; }
)";

}  // namespace

std::string report_html(const TrainingReport& r) {
  auto last = [](const std::vector<ReportPoint>& v) { return v.empty() ? std::string("–") : fmt::format("{:.4g}", v.back().value); };
  std::string rate = "–";
  if (!r.examples_per_s.empty()) {
    std::vector<double> v;
    for (auto& p : r.examples_per_s) v.push_back(p.value);
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    rate = fmt::format("{:.0f}", v[v.size() / 2]);
  }
  const double seconds = std::max({r.loss.empty() ? 0.0 : r.loss.back().seconds,
                                   r.accuracy.empty() ? 0.0 : r.accuracy.back().seconds});
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(r.title) +
                  "</title><style>" + kStyle + "</style></head><body><main>\n";
  h += "<h1>" + escape(r.title) + "</h1>\n";
  h += "<p class=\"sub\">started " + escape(r.started) + " · " + escape(r.outcome) + "</p>\n";
  h += "<div class=\"cards\">";
  h += "<div class=\"card\"><div class=\"k\">test accuracy</div><div class=\"v\" id=\"accuracy\">" + last(r.accuracy) + "</div></div>";
  h += "<div class=\"card\"><div class=\"k\">train loss</div><div class=\"v\" id=\"loss\">" + last(r.loss) + "</div></div>";
  h += "<div class=\"card\"><div class=\"k\">examples/s (median)</div><div class=\"v\">" + rate + "</div></div>";
  h += fmt::format("<div class=\"card\"><div class=\"k\">training time</div><div class=\"v\">{:.1f} s</div></div>", seconds);
  h += "</div>\n<h2>Loss</h2><div class=\"grid2\">";
  auto by_step = [](const ReportPoint& p) { return double(p.step); };
  auto by_time = [](const ReportPoint& p) { return p.seconds; };
  h += "<div class=\"panel\">" + line_chart("train loss by step", "step", r.loss, by_step, "loss-point", "#d9534f", "") + "</div>";
  h += "<div class=\"panel\">" + line_chart("train loss by time", "seconds", r.loss, by_time, "loss-point-t", "#d9534f", "") + "</div>";
  h += "</div>\n<h2>Accuracy</h2><div class=\"grid2\">";
  h += "<div class=\"panel\">" + line_chart("test accuracy by step", "step", r.accuracy, by_step, "accuracy-point", "#2e9e5b", "") + "</div>";
  h += "<div class=\"panel\">" + line_chart("test accuracy by time", "seconds", r.accuracy, by_time, "accuracy-point-t", "#2e9e5b", "") + "</div>";
  h += "</div>\n<h2>Speed</h2><div class=\"grid2\">";
  h += "<div class=\"panel\">" + line_chart("examples/s by step", "step", r.examples_per_s, by_step, "rate-point", "#5b8def", " examples/s") + "</div>";
  h += "<div class=\"panel\">" + line_chart("examples/s by time", "seconds", r.examples_per_s, by_time, "rate-point-t", "#5b8def", " examples/s") + "</div>";
  h += "</div>\n<h2>Time per op type</h2>";
  if (r.trace) {
    std::string steps;
    for (auto s : r.trace->steps) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
    h += fmt::format("<p class=\"note\">Of {} ({:.2f} ms in all; kernels on every thread together {:.2f} ms), from {} "
                     "(where they are the session's run() calls {}).</p>",
                     escape(r.traced_steps), r.trace->step_us / 1000, r.trace->kernel_us / 1000, escape(r.trace_file), steps);
    h += "<div class=\"panel\">" + op_bars(*r.trace) + "</div>";
  } else {
    h += "<p class=\"note\">No step was traced: run with --trace FILE --trace-steps A-B to see where a step's time goes.</p>";
  }
  h += "\n<h2>Settings</h2><table>";
  for (auto& [k, v] : r.settings) h += "<tr><td>" + escape(k) + "</td><td>" + escape(v) + "</td></tr>";
  h += "</table>\n</main></body></html>\n";
  return h;
}

void write_report(const std::string& path, const TrainingReport& report) {
  write_file_durably(path, report_html(report));
}

}  // namespace troupe::app
