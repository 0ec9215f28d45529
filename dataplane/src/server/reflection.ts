import type { Server } from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The FileDescriptorSet `npm run proto:gen` writes with buf (shipped next to the compiled code). */
const DESCRIPTORS = fileURLToPath(new URL("../../../../proto/gen/descriptors.binpb", import.meta.url));

/**
 * gRPC server reflection (v1 and v1alpha) over every service this server offers, so
 * grpcurl and other generic clients list and call them without .proto files. The files
 * are served as buf compiled them: descriptors re-derived by protobufjs misname map
 * entries, which strict clients such as grpcurl reject.
 */
export function addReflection(server: Server): void {
  // health.proto is among them: one descriptor set for every service this server offers.
  const files = fromBinary(FileDescriptorSetSchema, readFileSync(DESCRIPTORS)).file.map((file) =>
    Buffer.from(toBinary(FileDescriptorProtoSchema, file)),
  );
  // The service reads only `fileDescriptorProtos` of each entry.
  const definition = {
    files: {
      format: "Protocol Buffer 3 DescriptorProto" as const,
      type: {},
      fileDescriptorProtos: files,
    },
  };
  new ReflectionService(definition).addToServer(server);
}
