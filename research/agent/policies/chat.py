"""Chat formatting for token policies: the first prompt through the tokenizer's chat template (with tools),
the tokens of each observation found as the template's append-only delta (never by re-tokenising earlier
turns), and Qwen-style ``<tool_call>{json}</tool_call>`` parsing of generated text.

``TINY_TEMPLATE`` gives the bundled tiny tokenizer (``models.default_tokenizer()``, ChatML tokens) a
template of the same shape as Qwen2.5's: tools listed in the system turn, calls as ``<tool_call>`` blocks,
tool results as ``<tool_response>`` blocks in a user turn.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..actions import ToolCall

END_OF_TURN = "<|im_end|>"

# HF renders with trim_blocks/lstrip_blocks: every newline next to a tag is written as an expression.
NL = "{{ '\\n' }}"
TINY_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}"
    "{% else %}{% set system = '' %}{% endif %}"
    "{% if tools or system %}<|im_start|>system" + NL + "{{ system }}"
    "{% if tools %}"
    + NL
    + NL
    + "# Tools"
    + NL
    + NL
    + "You may call one or more functions. Function signatures "
    "in <tools></tools>:"
    + NL
    + "<tools>{% for tool in tools %}"
    + NL
    + "{{ tool | tojson }}{% endfor %}"
    + NL
    + "</tools>"
    + NL
    + NL
    + "For each call, return a JSON object inside <tool_call></tool_call> tags:"
    + NL
    + '<tool_call>{{ \'\\n{"name": <function-name>, "arguments": <args-json-object>}\\n\' }}</tool_call>'
    "{% endif %}<|im_end|>" + NL + "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}<|im_start|>user"
    + NL
    + "{{ message['content'] }}<|im_end|>"
    + NL
    + "{% elif message['role'] == 'assistant' %}<|im_start|>assistant"
    + NL
    + "{{ message['content'] or '' }}"
    "{% for call in message.get('tool_calls') or [] %}"
    + NL
    + "<tool_call>"
    + NL
    + "{{ '{\"name\": \"' + call.function.name + '\", \"arguments\": ' + call.function.arguments + '}' }}"
    + NL
    + "</tool_call>{% endfor %}<|im_end|>"
    + NL
    + "{% elif message['role'] == 'tool' %}"
    "{% if loop.index0 == 0 or messages[loop.index0 - 1]['role'] != 'tool' %}<|im_start|>user{% endif %}"
    + NL
    + "<tool_response>"
    + NL
    + "{{ message['content'] }}"
    + NL
    + "</tool_response>"
    "{% if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}<|im_end|>" + NL + "{% endif %}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant" + NL + "{% endif %}"
)

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_PROBE = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
_PROBE_REPLY = {"role": "assistant", "content": "A"}


class TemplateError(ValueError):
    """A chat template that rewrites earlier turns when a message is appended (no append-only delta)."""


class ChatFormat:
    """Token-level chat formatting for one tokenizer (``template``: a chat template overriding the
    tokenizer's, e.g. :data:`TINY_TEMPLATE`)."""

    def __init__(self, tokenizer, template: str | None = None):
        self.tok, self.template = tokenizer, template
        if template is None and not getattr(tokenizer, "chat_template", None):
            raise TemplateError("the tokenizer has no chat template; pass one (e.g. TINY_TEMPLATE)")
        self.eot_id = tokenizer.convert_tokens_to_ids(END_OF_TURN)
        if self.eot_id is None or self.eot_id == getattr(tokenizer, "unk_token_id", -1):
            raise TemplateError(f"the tokenizer has no {END_OF_TURN} token (ChatML templates only)")
        self.vocab = len(tokenizer)

    def render(self, messages, tools=None, add_generation_prompt=False) -> str:
        return self.tok.apply_chat_template(
            messages,
            tools=tools or None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            chat_template=self.template,
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages, tools) -> list[int]:
        return self.encode(self.render(messages, tools, add_generation_prompt=True))

    def observation_ids(self, new_messages, tools, last_token: int | None) -> list[int]:
        """Tokens that follow a finished assistant turn: its end-of-turn token if generation stopped
        without one, then the template's rendering of ``new_messages`` and the next generation prompt."""
        before = self.render(_PROBE + [_PROBE_REPLY], tools)
        after = self.render(_PROBE + [_PROBE_REPLY] + list(new_messages), tools, add_generation_prompt=True)
        if not after.startswith(before):
            raise TemplateError("the chat template changes earlier turns when tool results are appended")
        cut = before.rfind(END_OF_TURN)
        trailer = before[cut + len(END_OF_TURN) :] if cut >= 0 else ""
        ids = self.encode(trailer + after[len(before) :])
        return ids if last_token == self.eot_id else [self.eot_id] + ids

    def decode(self, ids: list[int]) -> str:
        text = self.tok.decode([i for i in ids if 0 <= i < self.vocab], skip_special_tokens=False)
        return text.split(END_OF_TURN)[0]

    def stop_ids(self) -> tuple[int, ...]:
        eos = getattr(self.tok, "eos_token_id", None)
        return tuple(sorted({self.eot_id} | ({eos} if eos is not None else set())))


def parse_tool_calls(text: str, turn: int) -> tuple[str, list[ToolCall]]:
    """(text outside the calls, the calls) of a generated turn; a block that is not ``{"name": str,
    "arguments": object}`` JSON becomes a call with an ``error`` (answered as an observation)."""
    calls = []
    for j, m in enumerate(_CALL.finditer(text)):
        cid = f"call_{turn}_{j}"
        try:
            obj = json.loads(m.group(1))
        except ValueError as exc:
            calls.append(ToolCall(cid, "", m.group(1)[:200], error=f"malformed tool call (not JSON: {exc})"))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            calls.append(
                ToolCall(
                    cid, "", m.group(1)[:200], error='a tool call needs {"name": ..., "arguments": {...}}'
                )
            )
            continue
        args: Any = obj.get("arguments", {})
        calls.append(ToolCall(cid, obj["name"], args if isinstance(args, str) else json.dumps(args)))
    rest = _CALL.sub("", text)
    if "<tool_call>" in rest:
        calls.append(ToolCall(f"call_{turn}_{len(calls)}", "", "", error="unterminated <tool_call> block"))
        rest = rest.split("<tool_call>")[0]
    return rest.strip(), calls
