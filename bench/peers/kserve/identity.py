"""KServe's Python ModelServer with identity models (OUTPUT0 = INPUT0): the benchmark's KServe peer.

Usage: identity.py --grpc_port N --http_port M   (KServe's own flags)
"""

from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.model_server import parser


class Identity(Model):
    def __init__(self, name: str):
        super().__init__(name)
        self.ready = True

    async def predict(self, payload: InferRequest, headers=None, response_headers=None) -> InferResponse:
        request_input = payload.inputs[0]
        output = InferOutput(name="OUTPUT0", shape=request_input.shape, datatype=request_input.datatype)
        output.set_data_from_numpy(request_input.as_numpy(), binary_data=True)
        return InferResponse(
            response_id=payload.id, model_name=self.name, infer_outputs=[output], use_binary_outputs=True
        )


if __name__ == "__main__":
    args, _ = parser.parse_known_args()
    ModelServer(grpc_port=args.grpc_port, http_port=args.http_port).start(
        [Identity("identity_fp32"), Identity("identity_bytes")]
    )
