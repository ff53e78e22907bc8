#pragma once
// The release version (CMake's project version) and the git commit the binary was built from
// (`git describe --always --dirty`, "unknown" outside a git checkout).
#include <string>

namespace surge::tools {

const char* surge_version();
const char* surge_commit();
// The allocator the program runs on: "jemalloc <version>" when linked with it (SURGE_JEMALLOC),
// else "glibc malloc".
std::string surge_allocator();

}  // namespace surge::tools
