#pragma once
// Lines of the Prometheus text exposition (format 0.0.4), shared by the drain's series.
#include <string>

namespace surge::engine::exposition {

// `# HELP` and `# TYPE` of a family.
void header(std::string& out, const char* name, const char* type, const char* help);
// One sample: `name{labels} value`.
void value_line(std::string& out, const std::string& name, double value);
// A label value with `\`, `"` and newlines escaped.
std::string label_value(const std::string& text);

}  // namespace surge::engine::exposition
