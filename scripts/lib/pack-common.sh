# Shared by scripts/pack-test.sh and scripts/pack-test-nodes.sh (sourced from the repository's root).

# Writes the README's quick start, exactly as shown, to <file>; fails when there is none or it does not
# import the package by name.
quickstart_from_readme() {
  local file=$1 name
  name=$(node -p "require('./package.json').name")
  node -e '
    const text = require("fs").readFileSync(process.argv[1], "utf8");
    const start = text.indexOf("## Quick start");
    const block = /```ts\n([\s\S]*?)```/.exec(text.slice(start));
    if (start < 0 || !block) { console.error("pack-test: no quick start block in README.md"); process.exit(1); }
    process.stdout.write(block[1]);
  ' README.md > "$file"
  grep -q "from '$name'" "$file" || { echo "pack-test: the README quick start does not import from '$name'" >&2; return 1; }
}

# The version range this repository's package.json gives <package> (dependencies, then devDependencies).
dep() { node -p "const p = require('./package.json'); (p.dependencies[process.argv[1]] || p.devDependencies[process.argv[1]])" "$1"; }

# The compiler options every fresh project of the pack tests shares (decorators as the README says).
pack_tsconfig_common='"experimentalDecorators": true, "emitDecoratorMetadata": true, "strict": true, "skipLibCheck": true, "target": "ES2022", "types": ["node"]'
