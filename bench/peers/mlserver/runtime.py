"""An MLServer runtime answering with its input (OUTPUT0 = INPUT0): the benchmark's MLServer peer."""

from mlserver import MLModel
from mlserver.types import InferenceRequest, InferenceResponse, ResponseOutput


class IdentityRuntime(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        request_input = payload.inputs[0]
        return InferenceResponse(
            model_name=self.name,
            id=payload.id,
            outputs=[
                ResponseOutput(
                    name="OUTPUT0",
                    shape=request_input.shape,
                    datatype=request_input.datatype,
                    data=request_input.data,
                )
            ],
        )
