"""Calls the data plane as Modular MAX's KServe gRPC clients do, on the wire.

MAX's clients are generated from MAX's copy of the KServe proto, whose
inference.GRPCInferenceService also declares a server-streaming ModelInferStream. The
messages are the standard ones, so this client takes them from tritonclient and calls both
methods by their full paths: the same bytes a MAX stub sends. A request is MAX's: one input
named "prompt" with no datatype or shape, the prompt's character codes in int_contents,
model_version "0", max_tokens as a string parameter. Prints one JSON object per call.
"""

import json
import sys

import grpc
from tritonclient.grpc import service_pb2 as pb

SERVICE = "/inference.GRPCInferenceService/"


def request(model: str, text: str, max_tokens: int) -> pb.ModelInferRequest:
    prompt = pb.ModelInferRequest.InferInputTensor(
        name="prompt", contents=pb.InferTensorContents(int_contents=[ord(c) for c in text])
    )
    message = pb.ModelInferRequest(model_name=model, model_version="0", inputs=[prompt])
    message.parameters["max_tokens"].string_param = str(max_tokens)
    return message


def text_of(response: pb.ModelInferResponse) -> dict:
    first = response.outputs[0]
    return {
        "name": first.name,
        "datatype": first.datatype,
        "text": "".join(chr(code) for code in first.contents.int_contents),
    }


def main() -> None:
    target, unary_model, stream_model = sys.argv[1:4]
    with grpc.insecure_channel(target) as channel:
        infer = channel.unary_unary(
            SERVICE + "ModelInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelInferResponse.FromString,
        )
        stream = channel.unary_stream(
            SERVICE + "ModelInferStream",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelInferResponse.FromString,
        )
        reply = infer(request(unary_model, "What is life?", 4), timeout=30)
        print(json.dumps({"call": "ModelInfer", **text_of(reply)}))
        pieces = [text_of(response) for response in stream(request(stream_model, "What is life?", 5), timeout=30)]
        print(
            json.dumps(
                {
                    "call": "ModelInferStream",
                    "responses": len(pieces),
                    "text": "".join(piece["text"] for piece in pieces),
                    "datatypes": sorted({piece["datatype"] for piece in pieces}),
                }
            )
        )


if __name__ == "__main__":
    main()
