#pragma once
// The release version (CMake's project version) and the git commit the binary was built from
// (`git describe --always --dirty`, "unknown" outside a git checkout).

namespace surge::tools {

const char* surge_version();
const char* surge_commit();

}  // namespace surge::tools
