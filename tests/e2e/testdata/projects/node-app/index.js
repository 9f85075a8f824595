// Formats a duration for people, with the `ms` package from the npm registry.
const ms = require("ms");

function describe(milliseconds) {
  return `took ${ms(milliseconds, { long: true })}`;
}

module.exports = { describe };
