"""docs/api.md names every program `cmake --install` installs (cmake/TroupeInstall.cmake's
_troupe_programs), as bin/NAME in its table of programs."""
import re
import sys

root = sys.argv[1]
install = open(f"{root}/cmake/TroupeInstall.cmake").read()
match = re.search(r"set\(_troupe_programs([^)]*)\)", install)
if not match:
    sys.exit("every_program_is_listed_test: no set(_troupe_programs ...) in cmake/TroupeInstall.cmake")
programs = match.group(1).split()
api = open(f"{root}/docs/api.md").read()
missing = [p for p in programs if f"| `bin/{p}` |" not in api]
if missing:
    sys.exit(f"every_program_is_listed_test: docs/api.md does not list {', '.join(missing)} in its table of programs")
print(f"every_program_is_listed_test: docs/api.md lists all {len(programs)} installed programs")
