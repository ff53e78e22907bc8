#pragma once
// Lines of the Prometheus text exposition (format 0.0.4), shared by the drain's series.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace surge::engine::exposition {

// `# HELP` and `# TYPE` of a family.
void header(std::string& out, const char* name, const char* type, const char* help);
// One sample: `name{labels} value`.
void value_line(std::string& out, const std::string& name, double value);
// A label value with `\`, `"` and newlines escaped.
std::string label_value(const std::string& text);

// Bounded cardinality: keeps the `top` first of `items` by `busier`, listed in the order of
// `listed` (ids or names, so that a series stays in its place from one scrape to the next).
template <class Item, class Busier, class Listed>
void keep_top(std::vector<Item>& items, std::size_t top, Busier busier, Listed listed) {
  std::sort(items.begin(), items.end(), busier);
  if (items.size() > top) items.resize(top);
  std::sort(items.begin(), items.end(), listed);
}

}  // namespace surge::engine::exposition
