#!/usr/bin/env bash
# Every C++ file of the project laid out as .clang-format says, so a drift is caught by the test
# command, not by the next reader. Usage: format_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r f; do
    [[ -f $f ]] && files+=("$f")
  done < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp')
else
  while IFS= read -r f; do files+=("$f"); done < <(find engine proto storage tools tests bench \
    \( -name '*.cpp' -o -name '*.hpp' \) -not -path '*/build/*')
fi
((${#files[@]})) || { echo "no C++ files found under $1" >&2; exit 1; }
clang-format --dry-run --Werror "${files[@]}"
echo "${#files[@]} files laid out as .clang-format says"
