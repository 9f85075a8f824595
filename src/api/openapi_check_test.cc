#include "src/api/openapi_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/api/openapi_document.h"

namespace abox::api {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

OpenApiOperation Op(const std::string& method, const std::string& pattern) {
  return {method, pattern};
}

// A small sound document: path-level and operation-level path parameters, a $ref'd one, a
// $ref'd response, and a HEAD operation (left out of the result).
constexpr char kSound[] = R"yaml(
openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /v1/things:
    get:
      responses:
        "200": {description: The things.}
    head:
      responses:
        "200": {description: Headers only.}
    post:
      responses:
        "201": {description: Made.}
        default: {$ref: "#/components/responses/Error"}
  /v1/things/{id}/parts/{part}:
    parameters:
      - $ref: "#/components/parameters/ThingId"
    delete:
      parameters:
        - {name: part, in: path, required: true, schema: {type: string}}
        - {name: force, in: query, schema: {type: boolean}}
      responses:
        "204": {description: Gone.}
        4XX: {$ref: "#/components/responses/Error"}
components:
  parameters:
    ThingId: {name: id, in: path, required: true, schema: {type: string}}
  responses:
    Error: {description: An error.}
)yaml";

TEST(OpenApiCheckTest, ListsTheOperationsOfASoundDocumentWithoutHead) {
  auto ops = OpenApiOperations(kSound);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_THAT(*ops, ElementsAre(Op("DELETE", "/v1/things/{id}/parts/{part}"),
                                Op("GET", "/v1/things"), Op("POST", "/v1/things")));
}

// `kSound` with `from` replaced by `to` (which must occur).
std::string Edited(const std::string& from, const std::string& to) {
  std::string doc = kSound;
  size_t at = doc.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) {
    doc.replace(at, from.size(), to);
  }
  return doc;
}

TEST(OpenApiCheckTest, RefusesAnUndeclaredPathParameter) {
  auto ops = OpenApiOperations(
      Edited("        - {name: part, in: path, required: true, schema: {type: string}}\n", ""));
  ASSERT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ops.status().message()),
              HasSubstr("DELETE /v1/things/{id}/parts/{part}: path parameter {part} is not "
                        "declared"));
}

TEST(OpenApiCheckTest, FollowsRefsToDeclaredParametersAndRefusesQueryOnes) {
  // The $ref'd parameter declares {id}; turned into a query parameter, it no longer does.
  auto ops = OpenApiOperations(Edited("ThingId: {name: id, in: path, required: true,",
                                      "ThingId: {name: id, in: query, required: true,"));
  ASSERT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ops.status().message()),
              HasSubstr("path parameter {id} is not declared"));
  EXPECT_THAT(std::string(ops.status().message()), Not(HasSubstr("{part} is not declared")));
}

TEST(OpenApiCheckTest, RefusesADeclaredPathParameterThePathLacks) {
  auto ops = OpenApiOperations(Edited("{name: part, in: path", "{name: piece, in: path"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()),
              AllOf(HasSubstr("declares path parameter `piece`"),
                    HasSubstr("path parameter {part} is not declared")));
}

TEST(OpenApiCheckTest, RequiresPathParametersToBeRequired) {
  auto ops = OpenApiOperations(
      Edited("{name: part, in: path, required: true", "{name: part, in: path, required: false"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()), HasSubstr("`part` must be `required: true`"));
}

TEST(OpenApiCheckTest, RefusesOperationsWithoutResponses) {
  auto ops = OpenApiOperations(Edited(R"(    get:
      responses:
        "200": {description: The things.}
)",
                                      R"(    get:
      summary: forgot the responses
)"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()), HasSubstr("GET /v1/things: no `responses`"));
}

TEST(OpenApiCheckTest, RefusesResponsesWithoutDescriptionOrWithABadCode) {
  auto ops = OpenApiOperations(Edited("\"201\": {description: Made.}", "\"2001\": {summary: x}"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()),
              AllOf(HasSubstr("response \"2001\" is not a status code"),
                    HasSubstr("POST /v1/things: response 2001 has no `description`")));
}

TEST(OpenApiCheckTest, RefusesRefsThatDoNotResolve) {
  auto ops = OpenApiOperations(Edited("default: {$ref: \"#/components/responses/Error\"}",
                                      "default: {$ref: \"#/components/responses/Oops\"}"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()),
              HasSubstr("/paths//v1/things/post/responses/default/$ref: "
                        "\"#/components/responses/Oops\" does not resolve"));
  // External references are not followed either.
  ops = OpenApiOperations(
      Edited("- $ref: \"#/components/parameters/ThingId\"", "- $ref: \"other.yaml#/ThingId\""));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()),
              HasSubstr("\"other.yaml#/ThingId\" does not resolve"));
}

TEST(OpenApiCheckTest, RefusesUnknownPathItemFieldsAndBadTemplates) {
  auto ops = OpenApiOperations(Edited("    post:\n", "    pots:\n"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()), HasSubstr("`pots` is neither an HTTP method"));
  ops = OpenApiOperations(Edited("  /v1/things:\n", "  /v1/things/x{id}:\n"));
  ASSERT_FALSE(ops.ok());
  EXPECT_THAT(std::string(ops.status().message()), HasSubstr("segment \"x{id}\""));
}

TEST(OpenApiCheckTest, RefusesWhatIsNotOpenApi3OrNotYaml) {
  EXPECT_THAT(
      std::string(
          OpenApiOperations(Edited("openapi: 3.0.3", "swagger: \"2.0\"")).status().message()),
      HasSubstr("is not an OpenAPI 3 version"));
  EXPECT_THAT(std::string(OpenApiOperations("openapi: 3.0.3\ninfo: {}\n").status().message()),
              HasSubstr("`paths:` is missing"));
  auto bad = OpenApiOperations("openapi: 3.0.3\npaths: {/a: [unclosed\n");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not valid YAML"));
  EXPECT_EQ(OpenApiOperations("- just\n- a list\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OpenApiCheckTest, DiffIsEmptyWhenTheRoutesMatchIgnoringHeadAndCase) {
  std::set<OpenApiOperation> spec = {Op("GET", "/v1/things"), Op("POST", "/v1/things")};
  EXPECT_EQ(
      DiffOperations(spec, {{"get", "/v1/things"}, {"HEAD", "/v1/things"}, {"POST", "/v1/things"}}),
      "");
}

TEST(OpenApiCheckTest, DiffNamesWhatEachSideLacks) {
  std::set<OpenApiOperation> spec = {Op("GET", "/v1/things"), Op("GET", "/v1/things/{id}"),
                                     Op("DELETE", "/v1/things/{id}")};
  std::string diff = DiffOperations(
      spec, {{"GET", "/v1/things"}, {"GET", "/v1/things/{thing}"}, {"POST", "/v1/things"}});
  EXPECT_EQ(diff,
            "missing in spec (served, not documented):\n"
            "    GET /v1/things/{thing}\n"
            "    POST /v1/things\n"
            "missing in server (documented, not served):\n"
            "    DELETE /v1/things/{id}\n"
            "    GET /v1/things/{id}\n");
}

TEST(OpenApiCheckTest, TheEmbeddedDocumentIsSoundAndListsTheSandboxApi) {
  absl::string_view yaml = OpenApiYaml();
  ASSERT_FALSE(yaml.empty());
  EXPECT_EQ(yaml.substr(0, 8), "openapi:");
  EXPECT_EQ(yaml.back(), '\n');  // the whole file, not cut short
  auto ops = OpenApiOperations(yaml);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_THAT(*ops, Contains(Op("GET", "/v1/sandboxes")));
  EXPECT_THAT(*ops, Contains(Op("POST", "/v1/sandboxes/{id}/execs")));
  EXPECT_THAT(*ops, Contains(Op("GET", "/v1/openapi.yaml")));
}

}  // namespace
}  // namespace abox::api
