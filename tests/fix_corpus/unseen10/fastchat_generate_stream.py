"""Streaming chat generation (lm-sys/FastChat `fastchat/serve/inference.py`: `prepare_logits_processor`,
`generate_stream`; `fastchat/utils.py`: `is_partial_stop`, `is_sentence_complete`; the consumer is modelled on
`SimpleChatIO.stream_output` in `fastchat/serve/cli.py`). Under `@torch.inference_mode()` the generator reads the
sampling parameters, builds a `LogitsProcessorList` of transformers warpers, tokenizes and truncates the prompt, and
per step runs the model with `past_key_values`, applies the processors (with `torch.as_tensor([output_ids])` for the
repetition penalty), picks tokens greedily (`torch.topk`) or by `torch.multinomial`, converts them with
`[int(index) for index in indices.tolist()]`, tests `token in stop_token_ids`, decodes the text every
`stream_interval` steps, searches the stop string with `output.rfind`, yields dicts and `break`s when stopped; at the
end it yields the finish reason, then `del past_key_values, out`, `gc.collect()`, `torch.cuda.empty_cache()`.
Adaptations: the Vicuna/LLaMA model (`load_model`) is replaced by a minimal stand-in decoder with the interface
used here (`config.is_encoder_decoder`, `device`, `model(input_ids, use_cache=True, past_key_values=...)` returning
`.logits` and `.past_key_values` as a tuple of key/value tensors); the tokenizer by a character-level stand-in
(`__call__(...).input_ids`, `decode`, `eos_token_id`); sizes shrunk (vocabulary of 30 symbols, context 64,
`max_new_tokens` 12 and 16). The consumer returns the last streamed text and the finish reason instead of printing.
So that a call repeats exactly, the called function seeds torch's global generator first (an adaptation). The first
call is greedy, the second samples with temperature, top-p, top-k, a repetition penalty and a stop string."""
import gc
from types import SimpleNamespace
from typing import Iterable, Dict

import torch
import torch.nn as nn
from transformers.generation.logits_process import (
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)


def is_partial_stop(output: str, stop_str: str):
    """Check whether the output contains a partial stop str."""
    for i in range(0, min(len(output), len(stop_str))):
        if stop_str.startswith(output[-i:]):
            return True
    return False


def is_sentence_complete(output: str):
    """Check whether the output is a complete sentence."""
    end_symbols = (".", "?", "!", "...", "。", "？", "！", "…", '"', "'", "”")
    return output.endswith(end_symbols)


def prepare_logits_processor(
    temperature: float, repetition_penalty: float, top_p: float, top_k: int
) -> LogitsProcessorList:
    processor_list = LogitsProcessorList()
    # TemperatureLogitsWarper doesn't accept 0.0, 1.0 makes it a no-op so we skip two cases.
    if temperature >= 1e-5 and temperature != 1.0:
        processor_list.append(TemperatureLogitsWarper(temperature))
    if repetition_penalty > 1.0:
        processor_list.append(RepetitionPenaltyLogitsProcessor(repetition_penalty))
    if 1e-8 <= top_p < 1.0:
        processor_list.append(TopPLogitsWarper(top_p))
    if top_k > 0:
        processor_list.append(TopKLogitsWarper(top_k))
    return processor_list


@torch.inference_mode()
def generate_stream(
    model,
    tokenizer,
    params: Dict,
    device: str,
    context_len: int,
    stream_interval: int = 2,
    judge_sent_end: bool = False,
):
    # Read parameters
    prompt = params["prompt"]
    len_prompt = len(prompt)
    temperature = float(params.get("temperature", 1.0))
    repetition_penalty = float(params.get("repetition_penalty", 1.0))
    top_p = float(params.get("top_p", 1.0))
    top_k = int(params.get("top_k", -1))  # -1 means disable
    max_new_tokens = int(params.get("max_new_tokens", 256))
    echo = bool(params.get("echo", True))
    stop_str = params.get("stop", None)
    stop_token_ids = params.get("stop_token_ids", None) or []
    stop_token_ids.append(tokenizer.eos_token_id)

    logits_processor = prepare_logits_processor(
        temperature, repetition_penalty, top_p, top_k
    )
    input_ids = tokenizer(prompt).input_ids

    if model.config.is_encoder_decoder:
        max_src_len = context_len
    else:  # truncate
        max_src_len = context_len - max_new_tokens - 1

    input_ids = input_ids[-max_src_len:]
    output_ids = list(input_ids)
    input_echo_len = len(input_ids)

    past_key_values = out = None
    sent_interrupt = False
    for i in range(max_new_tokens):
        if i == 0:  # prefill
            out = model(
                torch.as_tensor([input_ids], device=model.device), use_cache=True
            )
            logits = out.logits
            past_key_values = out.past_key_values
        else:  # decoding
            out = model(
                input_ids=torch.as_tensor(
                    [[token] if not sent_interrupt else output_ids],
                    device=model.device,
                ),
                use_cache=True,
                past_key_values=past_key_values if not sent_interrupt else None,
            )
            sent_interrupt = False
            logits = out.logits
            past_key_values = out.past_key_values

        if logits_processor:
            if repetition_penalty > 1.0:
                tmp_output_ids = torch.as_tensor([output_ids], device=logits.device)
            else:
                tmp_output_ids = None
            last_token_logits = logits_processor(tmp_output_ids, logits[:, -1, :])[0]
        else:
            last_token_logits = logits[0, -1, :]

        if device == "mps":
            # Switch to CPU by avoiding some bugs in mps backend.
            last_token_logits = last_token_logits.float().to("cpu")

        if temperature < 1e-5 or top_p < 1e-8:  # greedy
            _, indices = torch.topk(last_token_logits, 2)
            tokens = [int(index) for index in indices.tolist()]
        else:
            probs = torch.softmax(last_token_logits, dim=-1)
            indices = torch.multinomial(probs, num_samples=2)
            tokens = [int(token) for token in indices.tolist()]
        token = tokens[0]
        output_ids.append(token)

        if token in stop_token_ids:
            stopped = True
        else:
            stopped = False

        # Yield the output tokens
        if i % stream_interval == 0 or i == max_new_tokens - 1 or stopped:
            if echo:
                tmp_output_ids = output_ids
                rfind_start = len_prompt
            else:
                tmp_output_ids = output_ids[input_echo_len:]
                rfind_start = 0

            output = tokenizer.decode(
                tmp_output_ids,
                skip_special_tokens=True,
                spaces_between_special_tokens=False,
                clean_up_tokenization_spaces=True,
            )
            if judge_sent_end and stopped and not is_sentence_complete(output):
                if len(tokens) > 1:
                    token = tokens[1]
                    output_ids[-1] = token
                else:
                    output_ids.pop()
                stopped = False
                sent_interrupt = True

            partially_stopped = False
            if stop_str:
                if isinstance(stop_str, str):
                    pos = output.rfind(stop_str, rfind_start)
                    if pos != -1:
                        output = output[:pos]
                        stopped = True
                    else:
                        partially_stopped = is_partial_stop(output, stop_str)
                elif isinstance(stop_str, Iterable):
                    for each_stop in stop_str:
                        pos = output.rfind(each_stop, rfind_start)
                        if pos != -1:
                            output = output[:pos]
                            stopped = True
                            break
                        else:
                            partially_stopped = is_partial_stop(output, each_stop)
                            if partially_stopped:
                                break
                else:
                    raise ValueError("Invalid stop field type.")

            # Prevent yielding partial stop sequence
            if not partially_stopped:
                yield {
                    "text": output,
                    "usage": {
                        "prompt_tokens": input_echo_len,
                        "completion_tokens": i,
                        "total_tokens": input_echo_len + i,
                    },
                    "finish_reason": None,
                }

        if stopped:
            break

    # Finish stream event, which contains finish reason
    if i == max_new_tokens - 1:
        finish_reason = "length"
    elif stopped:
        finish_reason = "stop"
    else:
        finish_reason = None

    yield {
        "text": output,
        "usage": {
            "prompt_tokens": input_echo_len,
            "completion_tokens": i,
            "total_tokens": input_echo_len + i,
        },
        "finish_reason": finish_reason,
    }

    # Clean
    del past_key_values, out
    gc.collect()
    torch.cuda.empty_cache()


class CharTokenizer:
    """Adaptation: character-level stand-in for the LLaMA tokenizer."""

    def __init__(self):
        self.itos = ["</s>"] + list(" abcdefghijklmnopqrstuvwxyz.:")
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.eos_token_id = 0

    def __call__(self, text):
        return SimpleNamespace(input_ids=[self.stoi[c] for c in text if c in self.stoi])  # BREAK

    def decode(self, ids, skip_special_tokens=True, spaces_between_special_tokens=False,
               clean_up_tokenization_spaces=True):
        return "".join(self.itos[i] for i in ids if not (skip_special_tokens and i == self.eos_token_id))


class TinyCausalLM(nn.Module):
    """Adaptation: stand-in decoder with a tuple KV cache and the HF-style output fields used here."""

    def __init__(self, vocab_size=30, n_embd=16, n_head=2):
        super().__init__()
        self.config = SimpleNamespace(is_encoder_decoder=False)
        self.n_head = n_head
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(128, n_embd)
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.ln = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    @property
    def device(self):
        return self.wte.weight.device

    def forward(self, input_ids, use_cache=True, past_key_values=None):
        b, t = input_ids.shape
        past = 0 if past_key_values is None else past_key_values[0].shape[2]
        pos = torch.arange(past, past + t, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        q, k, v = self.qkv(x).split(x.shape[-1], dim=2)
        q, k, v = (z.view(b, t, self.n_head, -1).transpose(1, 2) for z in (q, k, v))
        if past_key_values is not None:
            k = torch.cat([past_key_values[0], k], dim=2)
            v = torch.cat([past_key_values[1], v], dim=2)
        mask = torch.ones(t, past + t, dtype=torch.bool, device=x.device).tril(diagonal=past)
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        logits = self.lm_head(self.ln(x))
        return SimpleNamespace(logits=logits, past_key_values=(k, v) if use_cache else None)  # BREAK


def stream_chat(model, tokenizer, gen_params, seed):
    torch.manual_seed(seed)  # adaptation: fixes the sampling draws  # BREAK
    output_stream = generate_stream(model, tokenizer, dict(gen_params), "cpu", context_len=64)
    text, finish_reason, n_chunks = "", None, 0
    for outputs in output_stream:
        text = outputs["text"]
        finish_reason = outputs["finish_reason"]
        n_chunks += 1
    return text, finish_reason, n_chunks


def target():
    torch.manual_seed(0)
    model = TinyCausalLM()
    model.eval()
    tok = CharTokenizer()
    greedy = {"prompt": "user: hello there. assistant:", "temperature": 0.0, "max_new_tokens": 12,
              "echo": False, "stop": None, "stop_token_ids": None}
    sampled = {"prompt": "user: tell a story. assistant:", "temperature": 0.7, "top_p": 0.9, "top_k": 20,
               "repetition_penalty": 1.2, "max_new_tokens": 16, "echo": False, "stop": "user:",
               "stop_token_ids": [29]}
    return [
        (stream_chat, (model, tok, greedy, 3), {}),
        (stream_chat, (model, tok, sampled, 5), {}),
    ]


EXPECT = ("caller: a generator-based decoding loop that moves every token to Python (`indices.tolist()`, "
          "`token in stop_token_ids`), decodes text and searches stop strings on the host; compile the model's "
          "forward (prefill/decode step) and keep `generate_stream` eager")
