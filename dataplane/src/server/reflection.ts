import type { Server } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema, FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { protoPath as healthProto } from "grpc-health-check";
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

/** The FileDescriptorSet `npm run proto:gen` writes with buf (shipped next to the compiled code). */
const DESCRIPTORS = fileURLToPath(new URL("../../../../proto/gen/descriptors.binpb", import.meta.url));

/**
 * gRPC server reflection (v1 and v1alpha) over every service this server offers, so
 * grpcurl and other generic clients list and call them without .proto files. Our own
 * files are served as buf compiled them: descriptors re-derived by protobufjs (what
 * proto-loader offers) misname map entries, which strict clients such as grpcurl reject.
 */
export function addReflection(server: Server): void {
  const ours = fromBinary(FileDescriptorSetSchema, readFileSync(DESCRIPTORS)).file.map((file) =>
    Buffer.from(toBinary(FileDescriptorProtoSchema, file)),
  );
  // health.proto has no maps; its loader-made descriptor is exact.
  const health: Buffer[] = [];
  for (const entry of Object.values(loadSync(healthProto, { includeDirs: [dirname(healthProto)] }))) {
    const protos = (entry as { fileDescriptorProtos?: unknown }).fileDescriptorProtos;
    if (Array.isArray(protos)) health.push(...(protos as Buffer[]));
  }
  // The service reads only `fileDescriptorProtos` of each entry.
  const definition = {
    files: {
      format: "Protocol Buffer 3 DescriptorProto" as const,
      type: {},
      fileDescriptorProtos: [...ours, ...health],
    },
  };
  new ReflectionService(definition).addToServer(server);
}
