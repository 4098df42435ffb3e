// The package is "type": "module"; its CommonJS build (dist/cjs, for
// require()) needs a package.json of its own saying so, or Node would
// read its .js files as ES modules.
import { writeFileSync } from "node:fs";

writeFileSync(new URL("./dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
