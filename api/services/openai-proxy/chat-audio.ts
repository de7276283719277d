import type { ChatModel } from '../../../core/catalog.ts';
import { GatewayError } from '../../../core/errors.ts';
import type { ChatCompletionRequest } from '../../routes/chat/schemas.ts';

// Audio in a chat call: spoken answers (`modalities` with "audio", an `audio` object naming the
// voice) and `input_audio` parts. OpenAI bills audio at other prices than text (gpt-4o-audio-
// preview: output about 8 times, input about 16 times its text price), and the catalog prices
// tokens of one kind: passed through to such a model, audio was charged at the text price. A
// self-hosted model (vLLM serving Qwen2-Audio, Ultravox) counts its audio as prompt tokens like
// any other, which the catalog's prices cover: its entry says so with `audio_as_tokens`.

/** Where `body` asks for audio, as a field path; undefined when it does not. */
function audioAskedAt(body: ChatCompletionRequest): string | undefined {
  if (body.modalities?.some((modality) => modality !== 'text')) return 'modalities';
  if (body.audio !== undefined && body.audio !== null) return 'audio';
  const { messages } = body;
  for (let index = 0; index < messages.length; index += 1) {
    const content = messages[index]!.content;
    if (!Array.isArray(content)) continue;
    for (let part = 0; part < content.length; part += 1) {
      if (content[part]!.type === 'input_audio') return `messages.${index}.content.${part}.type`;
    }
  }
  return undefined;
}

/** A 400 naming the field when `body` asks `model` for audio its catalog entry does not price. */
export function refuseUnpricedAudio(model: ChatModel, body: ChatCompletionRequest): void {
  if (model.audio_as_tokens) return;
  const field = audioAskedAt(body);
  if (field === undefined) return;
  throw new GatewayError(
    'invalid_request',
    `'${field}': audio is not offered on '${model.id}' here: the provider bills audio in and out at other prices than the text tokens this gateway's prices for it cover.`,
    field,
  );
}
