/**
 * The messages the data plane and a Python model process exchange (the other end is
 * dataplane/python/dynamo_kserve_python_stub.py): each is a frame's JSON header (frames.ts),
 * named by its `kind`, with named fields. Declared once here as data, from which the
 * TypeScript types below are derived; the stub's side declares the same as TypedDicts
 * (dataplane/python/stub_protocol.py), and python-protocol.unit.test.ts checks that the two
 * agree. Tensor bytes travel in the frame's payload or in shared memory, never in headers.
 *
 * A field's type is written as: "number", "string", "boolean", "object" (a JSON object:
 * parameters, args), "null", a part's name (PARTS), `<type>[]`, `<type>|<type>`, and a
 * trailing "?" for a field that may be absent.
 */
export const STUB_PROTOCOL = {
  parts: {
    /** A tensor given to a model: at `offset` in the payload, or in the inputs' shared memory. */
    InputTensor: {
      name: "string",
      datatype: "string",
      shape: "number[]",
      offset: "number",
      byteSize: "number",
      inSharedMemory: "boolean",
    },
    /** A tensor a model returned: next in the payload, or at `sharedOffset` in the outputs' shared memory. */
    OutputTensor: {
      name: "string",
      datatype: "string",
      shape: "number[]",
      byteSize: "number",
      sharedOffset: "number?",
    },
    /** An error with Triton's code name (pb_utils.TritonError: "INVALID_ARG", ...). */
    ErrorReply: { code: "string", message: "string" },
  },
  toStub: {
    /** The first frame: what to load and how; the shared-memory files are inherited descriptors (0: none). */
    settings: {
      file: "string",
      decoupled: "boolean",
      args: "object",
      sharedInputsFd: "number",
      sharedOutputsFd: "number",
      pythonShmByteSize: "number",
    },
    /**
     * A request for the model's execute. The requests of one execution (a batch the data
     * plane's scheduler formed) come one after the other, the last with `endsExecution`: the
     * stub runs them in one execute call, in the order they came.
     */
    execute: {
      id: "number",
      endsExecution: "boolean",
      inputs: "InputTensor[]",
      requestedOutputs: "string[]",
      parameters: "object",
      requestId: "string",
      correlationId: "number|string",
      flags: "number",
    },
    /** The data plane wants no more of the request (request.is_cancelled()). */
    cancel: { id: "number" },
    /** A response to the model's call of another model (BLS); outputs in the payload. */
    callResponse: {
      id: "number",
      final: "boolean",
      outputs: "OutputTensor[]?",
      parameters: "object?",
      error: "ErrorReply?",
    },
    /** The data plane has read these regions of the outputs' shared memory. */
    freeOutputs: { offsets: "number[]" },
    ping: {},
    /** The model's finalize runs, then the process exits. */
    finish: {},
  },
  fromStub: {
    /** initialize returned: requests may come. */
    ready: {},
    /** Loading or initializing the model failed (a traceback); the process exits. */
    fatal: { message: "string" },
    /** A response of a request: outputs or an error; `final` for its last. */
    response: {
      id: "number",
      final: "boolean",
      outputs: "OutputTensor[]?",
      parameters: "object?",
      error: "ErrorReply?",
    },
    /**
     * A decoupled model's execute call returned (its responses may still come): `id` is the
     * request that ended the execution. The instance may take its next execution.
     */
    executed: { id: "number" },
    /** The model calls another model of this data plane (BLS); inputs in the payload. */
    call: {
      id: "number",
      model: "string",
      version: "string",
      inputs: "InputTensor[]",
      requestedOutputs: "string[]",
      parameters: "object",
      requestId: "string",
      stream: "boolean",
      timeoutUs: "number",
    },
    /** A line of pb_utils.Logger at the data plane's level name (info, warn, error, debug). */
    log: { level: "string", message: "string" },
    pong: {},
    /** finalize has run: the process exits. */
    bye: {},
  },
} as const;

type Protocol = typeof STUB_PROTOCOL;
type Parts = Protocol["parts"];
type FieldSpecs = Readonly<Record<string, string>>;

/** The TypeScript type a field's written type stands for. */
type TypeOf<Spec extends string> = Spec extends `${infer First}|${infer Rest}`
  ? TypeOf<First> | TypeOf<Rest>
  : Spec extends `${infer Element}[]`
    ? readonly TypeOf<Element>[]
    : Spec extends "number"
      ? number
      : Spec extends "string"
        ? string
        : Spec extends "boolean"
          ? boolean
          : Spec extends "null"
            ? null
            : Spec extends "object"
              ? Readonly<Record<string, unknown>>
              : Spec extends keyof Parts
                ? FieldsOf<Parts[Spec]>
                : never;

/** An object of the fields `Specs` declares (those written with "?" optional). */
type FieldsOf<Specs extends FieldSpecs> = {
  readonly [Field in keyof Specs as Specs[Field] extends `${string}?` ? never : Field]: TypeOf<Specs[Field]>;
} & {
  readonly [
    Field in keyof Specs as Specs[Field] extends `${string}?` ? Field : never
  ]?: Specs[Field] extends `${infer Spec}?` ? TypeOf<Spec> : never;
};

type Simplify<T> = { [Key in keyof T]: T[Key] } & {};

export type Part<Name extends keyof Parts> = Simplify<FieldsOf<Parts[Name]>>;
export type InputTensorPart = Part<"InputTensor">;
export type OutputTensorPart = Part<"OutputTensor">;
export type ErrorReply = Part<"ErrorReply">;

export type ToStubKind = keyof Protocol["toStub"];
export type FromStubKind = keyof Protocol["fromStub"];

/** A message the data plane sends, of one kind. */
export type ToStub<Kind extends ToStubKind = ToStubKind> = Kind extends ToStubKind
  ? Simplify<{ readonly kind: Kind } & FieldsOf<Protocol["toStub"][Kind]>>
  : never;

/** A message the stub sends, of one kind. */
export type FromStub<Kind extends FromStubKind = FromStubKind> = Kind extends FromStubKind
  ? Simplify<{ readonly kind: Kind } & FieldsOf<Protocol["fromStub"][Kind]>>
  : never;

/** A message's fields without its kind: what a sender fills in. */
export type FieldsOfToStub<Kind extends ToStubKind> = Omit<ToStub<Kind>, "kind">;
