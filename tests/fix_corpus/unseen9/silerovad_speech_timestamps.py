"""Silero VAD's speech-segment finder (snakers4/silero-vad src/silero_vad/utils_vad.py: `get_speech_timestamps`,
kept whole, with `make_visualization`): under `@torch.no_grad()` it validates and squeezes the audio, casts a
multiple of 16 kHz down with `audio[::step]` and `warnings.warn`, calls `model.reset_states()`, then in a Python loop
over windows pads the last chunk and reads `speech_prob = model(chunk, sampling_rate).item()` into a list, and runs the
segmentation state machine in pure Python over those floats (`triggered`, `temp_end`, `possible_ends`,
`max(possible_ends, key=lambda x: x[1])`, `continue`s, a list of dicts), then pads the segments and converts them to
seconds with `round(...)`.
Adaptations: the real model is a TorchScript/ONNX file (a download); it is replaced by a minimal stand-in with the
same interface (`reset_states()`, `model(chunk, sr)` returning a `(1, 1)` probability): a `Linear` over the log-energy
of four sub-frames, smoothed with a recurrent state tensor that `reset_states` zeroes. `torchaudio`/`packaging`
imports, the ONNX wrapper, the iterator class and audio file I/O are left out. The audio is synthetic: low noise with
louder bursts (seeded). The first call uses 8 kHz audio with default settings; the second 32 kHz audio (cast to
16 kHz with a warning), `max_speech_duration_s=1.0` (the split branch) and `return_seconds=True`. The called function
resets the model's state itself (the original's `model.reset_states()`), so calls repeat exactly."""
import warnings
from typing import Callable

import torch
import torch.nn as nn


class VADStandIn(nn.Module):
    """Adaptation: stand-in for the Silero VAD network (same call interface)."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 1)
        with torch.no_grad():
            self.proj.weight.fill_(0.5)
            self.proj.bias.fill_(10.0)
        self.reset_states()

    def reset_states(self, batch_size=1):
        self._state = torch.zeros(batch_size, 1)

    def forward(self, x, sr: int):
        if x.dim() == 1:
            x = x.unsqueeze(0)
        frames = x.reshape(x.shape[0], 4, -1)
        feats = torch.log(frames.pow(2).mean(dim=-1) + 1e-8)
        h = 0.5 * self._state + 0.5 * self.proj(feats)
        self._state = h
        return torch.sigmoid(h)


def make_visualization(probs, step):
    import pandas as pd
    pd.DataFrame({'probs': probs},
                 index=[x * step for x in range(len(probs))]).plot(figsize=(16, 8),
                 kind='area', ylim=[0, 1.05], xlim=[0, len(probs) * step],
                 xlabel='seconds',
                 ylabel='speech probability',
                 colormap='tab20')


@torch.no_grad()
def get_speech_timestamps(audio: torch.Tensor,
                          model,
                          threshold: float = 0.5,
                          sampling_rate: int = 16000,
                          min_speech_duration_ms: int = 250,
                          max_speech_duration_s: float = float('inf'),
                          min_silence_duration_ms: int = 100,
                          speech_pad_ms: int = 30,
                          return_seconds: bool = False,
                          time_resolution: int = 1,
                          visualize_probs: bool = False,
                          progress_tracking_callback: Callable[[float], None] = None,
                          neg_threshold: float = None,
                          window_size_samples: int = 512,
                          min_silence_at_max_speech: float = 98,
                          use_max_poss_sil_at_max_speech: bool = True):

    if not torch.is_tensor(audio):
        try:
            audio = torch.Tensor(audio)
        except:
            raise TypeError("Audio cannot be casted to tensor. Cast it manually")

    if len(audio.shape) > 1:
        for i in range(len(audio.shape)):  # trying to squeeze empty dimensions
            audio = audio.squeeze(0)
        if len(audio.shape) > 1:
            raise ValueError("More than one dimension in audio. Are you trying to process audio with 2 channels?")

    if sampling_rate > 16000 and (sampling_rate % 16000 == 0):
        step = sampling_rate // 16000
        sampling_rate = 16000
        audio = audio[::step]
        warnings.warn('Sampling rate is a multiply of 16000, casting to 16000 manually!')  # BREAK
    else:
        step = 1

    if sampling_rate not in [8000, 16000]:
        raise ValueError("Currently silero VAD models support 8000 and 16000 (or multiply of 16000) sample rates")

    window_size_samples = 512 if sampling_rate == 16000 else 256

    model.reset_states()
    min_speech_samples = sampling_rate * min_speech_duration_ms / 1000
    speech_pad_samples = sampling_rate * speech_pad_ms / 1000
    max_speech_samples = sampling_rate * max_speech_duration_s - window_size_samples - 2 * speech_pad_samples
    min_silence_samples = sampling_rate * min_silence_duration_ms / 1000
    min_silence_samples_at_max_speech = sampling_rate * min_silence_at_max_speech / 1000

    audio_length_samples = len(audio)

    speech_probs = []
    for current_start_sample in range(0, audio_length_samples, window_size_samples):
        chunk = audio[current_start_sample: current_start_sample + window_size_samples]
        if len(chunk) < window_size_samples:
            chunk = torch.nn.functional.pad(chunk, (0, int(window_size_samples - len(chunk))))
        speech_prob = model(chunk, sampling_rate).item()  # BREAK
        speech_probs.append(speech_prob)
        # calculate progress and send it to callback function
        progress = current_start_sample + window_size_samples
        if progress > audio_length_samples:
            progress = audio_length_samples
        progress_percent = (progress / audio_length_samples) * 100
        if progress_tracking_callback:
            progress_tracking_callback(progress_percent)

    triggered = False
    speeches = []
    current_speech = {}

    if neg_threshold is None:
        neg_threshold = max(threshold - 0.15, 0.01)
    temp_end = 0  # to save potential segment end (and tolerate some silence)
    prev_end = next_start = 0  # to save potential segment limits in case of maximum segment size reached
    possible_ends = []

    for i, speech_prob in enumerate(speech_probs):
        if (speech_prob >= threshold) and temp_end:
            if temp_end != 0:
                sil_dur = (window_size_samples * i) - temp_end
                if sil_dur > min_silence_samples_at_max_speech:
                    possible_ends.append((temp_end, sil_dur))
                temp_end = 0
            if next_start < prev_end:
                next_start = window_size_samples * i

        if (speech_prob >= threshold) and not triggered:
            triggered = True
            current_speech['start'] = window_size_samples * i
            continue

        if triggered and (window_size_samples * i) - current_speech['start'] > max_speech_samples:
            if possible_ends:
                if use_max_poss_sil_at_max_speech:
                    prev_end, dur = max(possible_ends, key=lambda x: x[1])  # use the longest possible silence segment in the current speech chunk
                else:
                    prev_end, dur = possible_ends[-1]   # use the last possible silence segment
                current_speech['end'] = prev_end
                speeches.append(current_speech)
                current_speech = {}
                next_start = prev_end + dur
                if next_start < prev_end + window_size_samples * i:  # previously reached silence (< neg_thres) and is still not speech (< thres)
                    #triggered = False
                    current_speech['start'] = next_start
                else:
                    triggered = False
                    #current_speech['start'] = next_start
                possible_ends = [p_end for p_end in possible_ends if p_end[0] > next_start]
                prev_end = next_start = temp_end = 0
            else:
                current_speech['end'] = window_size_samples * i
                speeches.append(current_speech)
                current_speech = {}
                prev_end = next_start = temp_end = 0
                triggered = False
                possible_ends = []
                continue

        if (speech_prob < neg_threshold) and triggered:
            if not temp_end:
                temp_end = window_size_samples * i
            # if ((window_size_samples * i) - temp_end) > min_silence_samples_at_max_speech:  # condition to avoid cutting in very short silence
            #     prev_end = temp_end
            if (window_size_samples * i) - temp_end < min_silence_samples:
                continue
            else:
                current_speech['end'] = temp_end
                if (current_speech['end'] - current_speech['start']) > min_speech_samples:
                    speeches.append(current_speech)
                current_speech = {}
                prev_end = next_start = temp_end = 0
                triggered = False
                possible_ends = []
                continue

    if current_speech and (audio_length_samples - current_speech['start']) > min_speech_samples:
        current_speech['end'] = audio_length_samples
        speeches.append(current_speech)

    for i, speech in enumerate(speeches):
        if i == 0:
            speech['start'] = int(max(0, speech['start'] - speech_pad_samples))
        if i != len(speeches) - 1:
            silence_duration = speeches[i+1]['start'] - speech['end']
            if silence_duration < 2 * speech_pad_samples:
                speech['end'] += int(silence_duration // 2)
                speeches[i+1]['start'] = int(max(0, speeches[i+1]['start'] - silence_duration // 2))
            else:
                speech['end'] = int(min(audio_length_samples, speech['end'] + speech_pad_samples))
                speeches[i+1]['start'] = int(max(0, speeches[i+1]['start'] - speech_pad_samples))
        else:
            speech['end'] = int(min(audio_length_samples, speech['end'] + speech_pad_samples))

    if return_seconds:
        audio_length_seconds = audio_length_samples / sampling_rate
        for speech_dict in speeches:
            speech_dict['start'] = max(round(speech_dict['start'] / sampling_rate, time_resolution), 0)
            speech_dict['end'] = min(round(speech_dict['end'] / sampling_rate, time_resolution), audio_length_seconds)
    elif step > 1:
        for speech_dict in speeches:
            speech_dict['start'] *= step
            speech_dict['end'] *= step

    if visualize_probs:
        make_visualization(speech_probs, window_size_samples / sampling_rate)

    return speeches


def _synthetic_audio(gen, sr, seconds, bursts):
    n = int(sr * seconds)
    audio = 0.01 * torch.randn(n, generator=gen)
    for start_s, end_s in bursts:
        a, b = int(start_s * sr), int(end_s * sr)
        audio[a:b] += 0.5 * torch.randn(b - a, generator=gen)
    return audio


def target():
    torch.manual_seed(0)
    model = VADStandIn()
    gen = torch.Generator().manual_seed(0)
    audio1 = _synthetic_audio(gen, 8000, 3.0, [(0.3, 1.0), (1.12, 1.6), (2.2, 2.9)])
    audio2 = _synthetic_audio(gen, 32000, 2.5, [(0.1, 0.6), (0.8, 2.2)])
    return [
        (get_speech_timestamps, (audio1, model), {"sampling_rate": 8000}),
        (get_speech_timestamps, (audio2, model), {"sampling_rate": 32000, "max_speech_duration_s": 1.0,
                                                  "return_seconds": True}),
    ]


EXPECT = ("caller: the per-window `model(chunk, sampling_rate).item()` feeds a pure-Python segmentation state "
          "machine over floats (lists, dicts, `continue`s, `max(..., key=...)`); compile the model (or the "
          "probabilities of all windows, read once with `.tolist()`) and keep the segmentation on the host in the "
          "caller")
