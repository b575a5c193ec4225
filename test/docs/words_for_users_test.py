"""What users read speaks to users: README.md, docs/ and the code's comments name no issue
numbers, no machine lent for a while ("lent", "this VM"), and no file outside the repository
(the project's shared folder). Lists every offending line."""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1])
words = re.compile(r"[Ii]ssues? [0-9]+|\blent\b|\bthis VM\b|\.\./shared|shared folder|ARCHITECTURE\.md")
kinds = {".md", ".cpp", ".hpp", ".h", ".cu", ".sh", ".py", ".cmake", ".in", ".supp", ".capnp", ".proto", ".txt"}
me = pathlib.Path(__file__).resolve()
try:
    tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    files = [root / f for f in tracked]
except (OSError, subprocess.CalledProcessError):
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts and not p.parts[len(root.parts)].startswith("build")]
found = []
for path in files:
    if path.suffix not in kinds or path.resolve() == me or not path.is_file():
        continue
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if words.search(line):
            found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
if found:
    print("words_for_users_test: these lines speak of how the project is made, not of what it is:")
    print("\n".join(found))
    sys.exit(1)
print(f"words_for_users_test: {len(files)} files read, none names an issue, a lent machine or a file outside the repository")
