#include "tools/audit_chart.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "tools/process.hpp"
#include "tools/time_arg.hpp"

namespace surge::tools {
namespace {

namespace fs = std::filesystem;

// A private directory for the script and data, removed however drawing ends.
class scratch_dir {
 public:
  scratch_dir() {
    std::string pattern = (fs::temp_directory_path() / "surge-chart-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot create a temporary directory for the chart");
    }
    path_ = pattern;
  }
  ~scratch_dir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// A gnuplot single-quoted string: only the quote itself needs escaping, by doubling it.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string format_rate(double rate) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", rate);
  return text;
}

std::string script(const std::string& png_path, const std::string& data_path,
                   std::span<const chart_series> series, std::int64_t origin, std::int64_t end) {
  const int columns = series.size() > 1 ? 2 : 1;
  const int rows = static_cast<int>((series.size() + columns - 1) / columns);
  std::ostringstream gp;
  gp << "set terminal pngcairo size " << (columns == 1 ? 1000 : 1400) << "," << 90 + 260 * rows
     << " font 'sans,9'\n"
     << "set output " << quoted(png_path) << "\n"
     << "set key top right horizontal font 'sans,8' opaque\n"
     << "set grid ytics lc rgb '#dddddd'\n"
     << "set xrange [0:" << std::max<std::int64_t>(end - origin, 1) << "]\n"
     << "set xlabel " << quoted("seconds since " + format_utc(static_cast<double>(origin))) << "\n"
     << "set ylabel 'attempts per second'\n"
     << "set multiplot layout " << rows << "," << columns << " title "
     << quoted("delivered (2xx) and failed attempts per second against each subscriber's limit")
     << "\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    std::string title = "subscriber " + std::to_string(s.subscriber_id);
    if (s.has_limit) {
      title += ": rate " + format_rate(s.rate_per_sec) + "/s, burst " + std::to_string(s.burst);
    } else {
      title += " (no longer configured)";
    }
    // Headroom above the highest line keeps the key off the data and the limit lines.
    double top = s.has_limit ? static_cast<double>(s.burst) + s.rate_per_sec + 1 : 1;
    for (const auto& bin : s.answers) {
      top = std::max(top, static_cast<double>(std::max(bin.delivered, bin.failed)));
    }
    gp << "set title " << quoted(title) << "\n"
       << "set yrange [0:" << top * 1.3 << "]\n"
       << "plot " << quoted(data_path) << " index " << i
       << " using 1:2 with steps lw 1.5 lc rgb '#1f77b4' title 'delivered', " << quoted(data_path)
       << " index " << i
       << " using 1:3 with steps lw 1.5 lc rgb '#9467bd' title 'failed (not 2xx, or no answer)'";
    if (s.has_limit) {
      // The sustained limit, and what any 1 s window may hold (burst + rate + 1).
      gp << ", " << s.rate_per_sec << " with lines dt 2 lw 1.5 lc rgb '#d62728' title 'rate limit'"
         << ", " << static_cast<double>(s.burst) + s.rate_per_sec + 1
         << " with lines dt 3 lw 1 lc rgb '#ff7f0e' title '1 s allowance'";
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  return gp.str();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace

std::string chart_data(std::span<const chart_series> series, std::int64_t origin) {
  std::ostringstream out;
  for (const auto& s : series) {
    out << "# subscriber " << s.subscriber_id << "\n";
    if (s.answers.empty()) out << "0 0 0\n";  // an empty block would be an error
    std::int64_t previous = std::numeric_limits<std::int64_t>::min();
    for (const auto& bin : s.answers) {
      const std::int64_t t = bin.second - origin;
      if (previous != std::numeric_limits<std::int64_t>::min() && bin.second > previous + 1) {
        out << previous - origin + 1 << " 0 0\n";
        if (bin.second > previous + 2) out << t - 1 << " 0 0\n";
      }
      out << t << " " << bin.delivered << " " << bin.failed << "\n";
      previous = bin.second;
    }
    if (!s.answers.empty()) out << previous - origin + 1 << " 0 0\n";
    out << "\n\n";
  }
  return out.str();
}

void draw_delivery_chart(const std::string& gnuplot, const std::string& png_path,
                         std::span<const chart_series> series) {
  if (series.empty()) throw std::runtime_error("no attempts to chart");
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  std::int64_t end = std::numeric_limits<std::int64_t>::min();
  for (const auto& s : series) {
    if (s.answers.empty()) continue;
    origin = std::min(origin, s.answers.front().second);
    end = std::max(end, s.answers.back().second + 1);
  }
  if (end < origin) origin = end = 0;  // nothing attempted at all: flat panels

  const scratch_dir dir;
  const std::string data_path = dir.file("answers.dat");
  const std::string script_path = dir.file("chart.gp");
  std::ofstream(data_path) << chart_data(series, origin);
  if (!std::ifstream(data_path)) throw std::runtime_error("cannot write the chart data");
  std::ofstream(script_path) << script(fs::absolute(png_path).string(), data_path, series, origin,
                                       end);
  child_process child(gnuplot, {script_path}, dir.file("gnuplot.out"), dir.file("gnuplot.err"));
  auto status = child.wait(std::chrono::seconds(60));
  if (!status) status = child.stop(std::chrono::seconds(2));
  if (*status != 0) {
    throw std::runtime_error("gnuplot failed (exit " + std::to_string(*status) +
                             "): " + slurp(dir.file("gnuplot.err")));
  }
}

}  // namespace surge::tools
