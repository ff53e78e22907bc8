#!/bin/sh
# The layout rules the compiler cannot see (docs/architecture.md, first section), checked on every
# build and by ctest: SQLiteCpp's and libpq's headers are installed where any target could
# include them, and a static library's private dependencies still link, so only this keeps
#   - storage/ the one door: no file of engine/, tools/ or proto/ includes a backend's header
#     (storage/sqlite/, storage/postgres/, storage/seed001/), SQLiteCpp or libpq, or holds SQL;
#   - proto/ pure: it includes proto/, the standard library, Boost.JSON, Boost.URL and OpenSSL;
#   - engine/'s folders acyclic: no folder includes one that includes it back.
# Prints each breach and exits 1 if there is one.
root=${1:-.}
cd "$root" || exit 2
status=0

breach() {
  echo "layout: $1" >&2
  status=1
}

sources() { find "$@" -name '*.hpp' -o -name '*.cpp'; }

reach=$(grep -nE '#include *[<"](storage/(sqlite|postgres|seed001)/|SQLiteCpp/|libpq-fe\.h|postgresql/)' \
  $(sources engine tools proto))
[ -z "$reach" ] || breach "only storage/ reaches a storage backend, but $reach"
sql=$(grep -nE '"[^"]*(SELECT |INSERT INTO |UPDATE [a-z_]+ SET |DELETE FROM )' $(sources engine tools proto))
[ -z "$sql" ] || breach "SQL belongs to storage/, but $sql"

impure=$(grep -oE '#include *[<"][^>"]+[>"]' $(sources proto) | sed -E 's/#include *[<"]//; s/[>"]$//' |
  while IFS=: read -r file header; do
    case "$header" in
      proto/* | boost/json/* | boost/json.hpp | boost/url/* | openssl/*) ;;
      */*) echo "$file includes $header" ;;
      *) ;; # the standard library
    esac
  done)
[ -z "$impure" ] || breach "proto/ is pure, but $impure"

# engine/'s folders as a graph, each folder to the folders it includes: tsort finds any loop.
edges=$(for dir in engine/*/; do
  from=$(basename "$dir")
  grep -hoE '#include "engine/[a-z_]+/' "$dir"*.hpp "$dir"*.cpp 2>/dev/null |
    sed -E 's|#include "engine/||; s|/$||' | sort -u | grep -vx "$from" | sed "s|^|$from |"
done)
if ! loops=$(echo "$edges" | tsort 2>&1 >/dev/null) || [ -n "$loops" ]; then
  breach "engine/'s folders include each other: $loops"
fi

exit $status
