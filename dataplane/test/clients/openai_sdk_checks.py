"""Drives the data plane's OpenAI-compatible routes with the real openai SDK.

Usage: openai_sdk_checks.py BASE_URL MODEL STREAMS
  BASE_URL  e.g. http://127.0.0.1:8000/v1
  MODEL     a model with the LLM tensor interface
  STREAMS   "tokens": the model streams one response per token (decoupled), so a streamed
            reply has several chunks and usage counts them; "whole": one response
Prints one line per check and 'N passed, N failed'; exits non-zero if any check failed.
"""

import os
import sys

import openai

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pychecks"))
from checklist import Checklist

BASE_URL, MODEL, STREAMS = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=BASE_URL, api_key="unused", max_retries=0)
checks = Checklist()
check = checks.add


@check
def models_list_and_retrieve_the_model():
    ids = [model.id for model in client.models.list()]
    assert MODEL in ids, ids
    assert client.models.retrieve(MODEL).id == MODEL
    try:
        client.models.retrieve("no_such_model")
    except openai.NotFoundError as error:
        assert error.code == "model_not_found", error.body
    else:
        raise AssertionError("an unknown model was retrieved")


@check
def completion_and_its_stream_agree():
    whole = client.completions.create(model=MODEL, prompt="tell me about tensors", max_tokens=6, seed=3)
    text = whole.choices[0].text
    assert text, whole
    assert whole.choices[0].finish_reason in ("length", "stop"), whole
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt="tell me about tensors",
            max_tokens=6,
            seed=3,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    streamed = "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)
    assert streamed == text, (streamed, text)
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices, chunks[-1]
    if STREAMS == "tokens":
        # One chunk per token (a model without a finish_reason output gets a closing chunk of its own).
        assert len([chunk for chunk in chunks if chunk.choices and chunk.choices[0].text]) == 6, chunks
        assert usage.completion_tokens == 6, usage
        assert whole.usage.completion_tokens == 6, whole.usage


@check
def chat_and_its_stream_agree():
    messages = [{"role": "user", "content": "hello there"}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=5, temperature=0.5, top_p=0.9)
    message = whole.choices[0].message
    assert message.role == "assistant" and message.content, whole
    stream = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=5, stream=True)
    chunks = [chunk for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant", chunks[0]
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert streamed == message.content, (streamed, message.content)
    assert chunks[-1].choices[0].finish_reason in ("length", "stop"), chunks[-1]


@check
def a_longer_chat():
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ]
    reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=3, stop=["zzz"])
    assert reply.choices[0].message.content, reply


@check
def errors_in_openai_shape():
    try:
        client.chat.completions.create(model="no_such_model", messages=[{"role": "user", "content": "x"}])
    except openai.NotFoundError as error:
        assert "no_such_model" in error.message, error.message
        assert error.code == "model_not_found", error.body
    else:
        raise AssertionError("an unknown model was accepted")
    try:
        client.completions.create(model=MODEL, prompt="x", max_tokens="many")
    except openai.BadRequestError as error:
        assert "max_tokens" in error.message, error.message
    else:
        raise AssertionError("a bad max_tokens was accepted")
    # Options the server does not take are the client's error (400, never retried), naming the parameter.
    retrying = openai.OpenAI(base_url=BASE_URL, api_key="unused", max_retries=2)
    for param, value in (("n", 2), ("tools", [{"type": "function", "function": {"name": "f"}}])):
        try:
            retrying.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], **{param: value})
        except openai.BadRequestError as error:
            assert error.param == param and f"'{param}'" in error.message, (error.param, error.message)
        else:
            raise AssertionError(f"{param}={value} was accepted")


@check
def a_stop_sequence_ends_the_answer():
    if STREAMS != "tokens":
        return  # an upstream's own generation: its stop handling is its own
    whole = client.completions.create(model=MODEL, prompt="tell me about tensors", max_tokens=8, seed=5)
    stop = " ".join(whole.choices[0].text.split(" ")[2:4])
    stopped = client.completions.create(model=MODEL, prompt="tell me about tensors", max_tokens=8, seed=5, stop=[stop])
    choice = stopped.choices[0]
    assert choice.finish_reason == "stop" and choice.text == whole.choices[0].text.split(stop)[0], (choice, stop)


checks.run()
