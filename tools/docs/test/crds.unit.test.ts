import assert from "node:assert/strict";
import { crdsPage, fieldsOf, typeOf, validationOf, type Schema } from "../crds.js";

describe("the CRD reference (tools/docs/crds.ts)", () => {
  it("renders every OpenAPI constraint of a field", () => {
    const schema: Schema = {
      type: "integer",
      minimum: 1,
      maximum: 65535,
      exclusiveMaximum: true,
    };
    assert.equal(validationOf(schema), "≥ 1<br>< 65535");
    assert.equal(
      validationOf({ type: "string", minLength: 1, maxLength: 63, pattern: "^[a-z]|x$", enum: ["A", "B"] }),
      "one of <code>A</code>, <code>B</code><br>length ≥ 1<br>length ≤ 63<br>matches <code>^&#91;a-z&#93;&#124;x$</code>",
    );
  });

  it("renders CEL rules with their messages and the field they are reported at", () => {
    const schema: Schema = {
      type: "object",
      "x-kubernetes-validations": [
        { rule: "self.a <= self.b || !has(self.b)", message: "a must not exceed b", fieldPath: ".a" },
        { rule: "has(self.c)", messageExpression: "'c is ' + 'missing'" },
      ],
    };
    assert.equal(
      validationOf(schema),
      "rule <code>self.a &lt;= self.b &#124;&#124; !has(self.b)</code>: “a must not exceed b” (reported at <code>.a</code>)" +
        "<br>rule <code>has(self.c)</code>: “(computed) 'c is ' + 'missing'”",
    );
  });

  it("renders the constraints of list items and map values on the list or map", () => {
    assert.equal(
      validationOf({ type: "array", minItems: 1, items: { type: "string", maxLength: 5 } }),
      "items ≥ 1<br>each item: length ≤ 5",
    );
    assert.equal(
      validationOf({
        type: "object",
        additionalProperties: { "x-kubernetes-int-or-string": true, pattern: "^[0-9]+$" },
      }),
      "each value: matches <code>^&#91;0-9&#93;+$</code>",
    );
    assert.equal(
      validationOf({ type: "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"] }),
      "list type <code>map</code> keyed by <code>type</code>",
    );
  });

  it("names types as a reader says them", () => {
    assert.equal(typeOf({ type: "integer", format: "int32" }), "integer (int32)");
    assert.equal(typeOf({ type: "array", items: { type: "string" } }), "array of string");
    assert.equal(typeOf({ type: "object", additionalProperties: { type: "string" } }), "map of string to string");
    assert.equal(typeOf({ type: "object", "x-kubernetes-preserve-unknown-fields": true }), "object (any fields)");
    assert.equal(typeOf({ anyOf: [{ type: "integer" }, { type: "string" }] }), "integer or string");
  });

  it("lists nested fields depth first, with what is required, through list items and map values", () => {
    const schema: Schema = {
      type: "object",
      required: ["a"],
      properties: {
        a: { type: "object", properties: { b: { type: "string" } } },
        list: { type: "array", items: { type: "object", required: ["c"], properties: { c: { type: "string" } } } },
        map: { type: "object", additionalProperties: { type: "object", properties: { d: { type: "string" } } } },
      },
    };
    assert.deepEqual(
      fieldsOf(schema, "spec").map(({ path, required }) => [path, required]),
      [
        ["spec.a", true],
        ["spec.a.b", false],
        ["spec.list", false],
        ["spec.list[].c", true],
        ["spec.map", false],
        ["spec.map.<key>.d", false],
      ],
    );
  });

  it("writes a CRD's spec table with its defaults and rules", () => {
    const crd = [
      "apiVersion: apiextensions.k8s.io/v1",
      "kind: CustomResourceDefinition",
      "spec:",
      "  group: example.dev",
      "  scope: Namespaced",
      "  names: { kind: Thing, plural: things, shortNames: [th] }",
      "  versions:",
      "    - name: v1",
      "      served: true",
      "      storage: true",
      "      schema:",
      "        openAPIV3Schema:",
      "          type: object",
      "          properties:",
      "            spec:",
      "              type: object",
      "              properties:",
      "                port: { type: integer, default: 8001, minimum: 1, description: 'The port | the one' }",
    ].join("\n");
    const page = crdsPage(new Map([["crds/things.yaml", crd]]));
    assert.match(page, /^## Thing$/m);
    assert.match(
      page,
      /\| <code>example\.dev\/v1<\/code> \| <code>Thing<\/code> \| <code>things<\/code> \| <code>th<\/code> \|/,
    );
    assert.match(
      page,
      /^\| <code>spec\.port<\/code> \| <code>integer<\/code> \| {3}\| <code>8001<\/code> \| ≥ 1 \| The port &#124; the one \|$/m,
    );
  });
});
