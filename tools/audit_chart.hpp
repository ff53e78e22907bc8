#pragma once
// `surge audit --chart`: per subscriber, 2xx and failed attempts per second against its limit,
// drawn by gnuplot.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "storage/audit.hpp"

namespace surge::tools {

struct chart_series {
  std::int64_t subscriber_id = 0;
  bool has_limit = false;
  double rate_per_sec = 0;
  std::int64_t burst = 0;
  std::vector<storage::second_answers> answers;
};

// The chart's data: one block per series (selected with gnuplot's `index`) of "second delivered
// failed" lines, seconds relative to `origin`, each gap closed by zeros so that the steps drop
// to 0 there instead of bridging it.
std::string chart_data(std::span<const chart_series> series, std::int64_t origin);

// Writes a PNG with one panel per series (a shared time axis) by running `gnuplot` on a script
// and a data file in a temporary directory. Throws std::runtime_error with gnuplot's message
// when it fails.
void draw_delivery_chart(const std::string& gnuplot, const std::string& png_path,
                         std::span<const chart_series> series);

}  // namespace surge::tools
