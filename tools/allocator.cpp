// Which allocator the surge program was linked with (tools/version.hpp).
#include <string>

#include "tools/version.hpp"

#ifdef SURGE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace surge::tools {

std::string surge_allocator() {
#ifdef SURGE_JEMALLOC
  const char* version = nullptr;
  std::size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc";
#else
  return "glibc malloc";
#endif
}

}  // namespace surge::tools
