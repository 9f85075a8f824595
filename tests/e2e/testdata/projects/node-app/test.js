const assert = require("node:assert");
const { describe } = require("./index");

assert.strictEqual(describe(60000), "took 1 minute");
assert.strictEqual(describe(2 * 3600 * 1000), "took 2 hours");
console.log("node-app: 2 tests passed");
