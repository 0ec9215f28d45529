import { parse } from "yaml";
import { code, generatedNote, page, prose, table } from "./markdown.js";

/**
 * docs/reference/crds.md: every field of every CRD in crds/ (the source of truth) with its
 * type, default, validation (the OpenAPI constraints and the CEL rules with their messages)
 * and description.
 */

/** The part of a CRD's OpenAPI v3 schema this page reads. */
export interface Schema {
  readonly type?: string;
  readonly format?: string;
  readonly description?: string;
  readonly default?: unknown;
  readonly enum?: readonly unknown[];
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: boolean;
  readonly exclusiveMaximum?: boolean;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly pattern?: string;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly required?: readonly string[];
  readonly properties?: Readonly<Record<string, Schema>>;
  readonly items?: Schema;
  readonly additionalProperties?: Schema | boolean;
  readonly anyOf?: readonly Schema[];
  readonly "x-kubernetes-int-or-string"?: boolean;
  readonly "x-kubernetes-preserve-unknown-fields"?: boolean;
  readonly "x-kubernetes-list-type"?: string;
  readonly "x-kubernetes-list-map-keys"?: readonly string[];
  readonly "x-kubernetes-validations"?: readonly CelRule[];
}

export interface CelRule {
  readonly rule: string;
  readonly message?: string;
  readonly messageExpression?: string;
  readonly fieldPath?: string;
  readonly reason?: string;
}

interface Crd {
  readonly spec: {
    readonly group: string;
    readonly scope: string;
    readonly names: { readonly kind: string; readonly plural: string; readonly shortNames?: readonly string[] };
    readonly versions: readonly {
      readonly name: string;
      readonly served: boolean;
      readonly storage: boolean;
      readonly schema: { readonly openAPIV3Schema: Schema };
    }[];
  };
}

/** A map's values (additionalProperties as a schema), or undefined for an object of named fields. */
const mapValues = (schema: Schema): Schema | undefined =>
  typeof schema.additionalProperties === "object" ? schema.additionalProperties : undefined;

/** The type as a reader says it: `integer (int32)`, `array of string`, `map of string to string`. */
export function typeOf(schema: Schema): string {
  if (schema["x-kubernetes-int-or-string"]) return "integer or string";
  if (schema.anyOf !== undefined) return schema.anyOf.map(typeOf).join(" or ");
  const values = mapValues(schema);
  if (values !== undefined) return `map of string to ${typeOf(values)}`;
  if (schema.type === "array" && schema.items !== undefined) return `array of ${typeOf(schema.items)}`;
  if (schema.type === "object" && schema["x-kubernetes-preserve-unknown-fields"] && schema.properties === undefined) {
    return "object (any fields)";
  }
  const type = schema.type ?? "any";
  return schema.format === undefined ? type : `${type} (${schema.format})`;
}

const bound = (exclusive: boolean | undefined, inclusive: string, strict: string): string =>
  exclusive ? strict : inclusive;

/** The OpenAPI constraints on one value, each as a short phrase. */
function constraintsOf(schema: Schema): string[] {
  const phrases: string[] = [];
  if (schema.enum !== undefined) phrases.push(`one of ${schema.enum.map((value) => code(String(value))).join(", ")}`);
  if (schema.minimum !== undefined) phrases.push(`${bound(schema.exclusiveMinimum, "≥", ">")} ${schema.minimum}`);
  if (schema.maximum !== undefined) phrases.push(`${bound(schema.exclusiveMaximum, "≤", "<")} ${schema.maximum}`);
  if (schema.minLength !== undefined) phrases.push(`length ≥ ${schema.minLength}`);
  if (schema.maxLength !== undefined) phrases.push(`length ≤ ${schema.maxLength}`);
  if (schema.pattern !== undefined) phrases.push(`matches ${code(schema.pattern)}`);
  if (schema.minItems !== undefined) phrases.push(`items ≥ ${schema.minItems}`);
  if (schema.maxItems !== undefined) phrases.push(`items ≤ ${schema.maxItems}`);
  const listType = schema["x-kubernetes-list-type"];
  if (listType !== undefined) {
    const keys = schema["x-kubernetes-list-map-keys"];
    phrases.push(`list type ${code(listType)}${keys === undefined ? "" : ` keyed by ${keys.map(code).join(", ")}`}`);
  }
  return phrases;
}

/** A CEL rule (x-kubernetes-validations): the rule, then what the API server answers when it fails. */
function celRuleOf(rule: CelRule): string {
  const message =
    rule.message ?? (rule.messageExpression === undefined ? undefined : `(computed) ${rule.messageExpression}`);
  const at = rule.fieldPath === undefined ? "" : ` (reported at ${code(rule.fieldPath)})`;
  return `rule ${code(rule.rule)}${message === undefined ? "" : `: “${prose(message)}”`}${at}`;
}

/**
 * Everything the API server checks on one field: its constraints, those of its items or
 * map values, and its CEL rules, one per line of the cell.
 */
export function validationOf(schema: Schema): string {
  const values = mapValues(schema) ?? (schema.type === "array" ? schema.items : undefined);
  const nested = values === undefined || values.properties !== undefined ? [] : constraintsOf(values);
  const noun = mapValues(schema) === undefined ? "each item" : "each value";
  return [
    ...constraintsOf(schema),
    ...(nested.length === 0 ? [] : [`${noun}: ${nested.join(", ")}`]),
    ...(schema["x-kubernetes-validations"] ?? []).map(celRuleOf),
  ].join("<br>");
}

export interface FieldRow {
  readonly path: string;
  readonly schema: Schema;
  readonly required: boolean;
}

/**
 * The fields under `schema` at `path`, depth first in the schema's order: named properties,
 * the fields of an array's object items (`path[]`) and of a map's object values (`path.<key>`).
 */
export function fieldsOf(schema: Schema, path: string): FieldRow[] {
  const rows: FieldRow[] = [];
  const required = new Set(schema.required ?? []);
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const fieldPath = `${path}.${name}`;
    rows.push({ path: fieldPath, schema: property, required: required.has(name) });
    rows.push(...fieldsOf(property, fieldPath));
  }
  if (schema.type === "array" && schema.items?.properties !== undefined)
    rows.push(...fieldsOf(schema.items, `${path}[]`));
  const values = mapValues(schema);
  if (values?.properties !== undefined) rows.push(...fieldsOf(values, `${path}.<key>`));
  return rows;
}

function fieldRow({ path, schema, required }: FieldRow): string[] {
  return [
    code(path),
    code(typeOf(schema)),
    required ? "yes" : "",
    schema.default === undefined ? "" : code(JSON.stringify(schema.default)),
    validationOf(schema),
    prose(schema.description ?? ""),
  ];
}

/** The table of one object (spec, status): its own rules first, as the row of the object itself. */
function objectTable(schema: Schema, name: string, required: boolean): string {
  const rows = [{ path: name, schema, required }, ...fieldsOf(schema, name)];
  return table(["Field", "Type", "Required", "Default", "Validation", "Description"], rows.map(fieldRow));
}

/** One CRD's section: its names, then a table each for spec and status. */
function crdSection(file: string, crd: Crd): string[] {
  const { names, group, scope } = crd.spec;
  const version = crd.spec.versions.find((candidate) => candidate.storage) ?? crd.spec.versions[0]!;
  const schema = version.schema.openAPIV3Schema;
  const required = new Set(schema.required ?? []);
  const facts = table(
    ["apiVersion", "kind", "plural", "short names", "scope", "source"],
    [
      [
        code(`${group}/${version.name}`),
        code(names.kind),
        code(names.plural),
        (names.shortNames ?? []).map(code).join(", "),
        prose(scope),
        code(file),
      ],
    ],
  );
  const objects = Object.entries(schema.properties ?? {}).filter(([, property]) => property.properties !== undefined);
  return [
    `## ${names.kind}`,
    prose(schema.description ?? ""),
    facts,
    ...objects.flatMap(([name, property]) => [`### ${name}`, objectTable(property, name, required.has(name))]),
  ];
}

/** The page for the CRDs in `files` (path in the repository -> YAML text), in the order given. */
export function crdsPage(files: ReadonlyMap<string, string>): string {
  return page([
    "# Custom resources",
    generatedNote("the CustomResourceDefinitions in `crds/`"),
    "Each field with its type, whether it is required, the default the API server fills in, and what the API server checks when an object is created or changed: the OpenAPI constraints and the CEL rules (`x-kubernetes-validations`), with the message it answers when a rule fails.",
    ...[...files].flatMap(([file, text]) => crdSection(file, parse(text) as Crd)),
  ]);
}
