// Validates OpenAPI documents against the OpenAPI 3.0 schema (strict):
//   node validate.mjs FILE.json...
// Exits non-zero naming the first errors of a document that is not valid.
import { Validator } from "@seriousme/openapi-schema-validator";
import { readFileSync } from "node:fs";

let failed = false;
for (const file of process.argv.slice(2)) {
  const validator = new Validator();
  const result = await validator.validate(JSON.parse(readFileSync(file, "utf8")));
  if (result.valid) {
    console.log(`${file}: valid OpenAPI ${validator.version}`);
  } else {
    failed = true;
    console.error(`${file}: INVALID: ${JSON.stringify(result.errors, null, 1).slice(0, 2000)}`);
  }
}
process.exit(failed ? 1 : 0);
