import type { VideoModel } from '../../../core/catalog.ts';
import { SPEC_REFERENCE_CAPS } from '../../../core/video-validation.ts';
import type { ReferenceMediaRole, ReferenceMediaType } from '../../../vendors/types.ts';

// What one model accepts in metadata.content, in two forms from the same catalog entry: the
// roles each entry type may take (which zod checks per entry), and the rules across entries
// (how many of each role, reference mode versus first/last-frame mode) as JSON Schema 2020-12,
// which zod cannot express. core/video-validation.ts enforces the cross-entry rules with its
// own messages; the JSON form exists so the OpenAPI document is as strict as that code, and
// Schemathesis (test/contract) fails if the two ever disagree.

export interface ContentRoles {
  image_url: ReferenceMediaRole[];
  video_url: ReferenceMediaRole[];
  audio_url: ReferenceMediaRole[];
}

function capsOf(model: VideoModel) {
  return {
    images: Math.min(SPEC_REFERENCE_CAPS.images, model.reference.images),
    videos: Math.min(SPEC_REFERENCE_CAPS.videos, model.reference.videos),
    audios: Math.min(SPEC_REFERENCE_CAPS.audios, model.reference.audios),
  };
}

/** The roles each entry type may take for this model; an empty list means the type is refused. */
export function contentRolesFor(model: VideoModel): ContentRoles {
  const caps = capsOf(model);
  const imageRoles: ReferenceMediaRole[] = [];
  if (caps.images > 0) imageRoles.push('reference_image');
  if (model.reference.frames) imageRoles.push('first_frame', 'last_frame');
  return {
    image_url: imageRoles,
    video_url: caps.videos > 0 ? ['reference_video'] : [],
    audio_url: caps.audios > 0 ? ['reference_audio'] : [],
  };
}

export function allowedEntryTypes(roles: ContentRoles): ReferenceMediaType[] {
  return (Object.keys(roles) as ReferenceMediaType[]).filter((type) => roles[type].length > 0);
}

type JsonSchema = Record<string, unknown>;

function withRole(role: ReferenceMediaRole): JsonSchema {
  return { type: 'object', properties: { role: { const: role } }, required: ['role'] };
}

/** At most `max` entries with this role (and at least `min`). */
function roleCount(role: ReferenceMediaRole, max: number, min = 0): JsonSchema {
  return { contains: withRole(role), minContains: min, maxContains: max };
}

function rolesOnly(roles: ReferenceMediaRole[]): JsonSchema {
  return { items: { type: 'object', properties: { role: { enum: roles } } } };
}

/** JSON Schema keywords for the content array beyond its items: the cross-entry rules. */
export function contentArrayRules(model: VideoModel): JsonSchema {
  const caps = capsOf(model);
  const roles = contentRolesFor(model);
  const mediaCaps: JsonSchema[] = [];
  if (caps.videos > 0) mediaCaps.push(roleCount('reference_video', caps.videos));
  if (caps.audios > 0) mediaCaps.push(roleCount('reference_audio', caps.audios));
  const mediaRoles = [...roles.video_url, ...roles.audio_url];

  const referenceRoles: ReferenceMediaRole[] = [...(caps.images > 0 ? (['reference_image'] as const) : []), ...mediaRoles];
  const referenceCaps = [...(caps.images > 0 ? [roleCount('reference_image', caps.images)] : []), ...mediaCaps];
  // A model that takes no entries at all is already described by the array's maxItems of 0.
  if (!model.reference.frames && referenceRoles.length === 0) return {};

  const referenceMode: JsonSchema = {
    description: 'Reference mode: reference images (cited as @image1…@imageN), videos and audio.',
    ...(referenceRoles.length > 0 ? rolesOnly(referenceRoles) : { maxItems: 0 }),
    ...(referenceCaps.length > 0 ? { allOf: referenceCaps } : {}),
  };
  if (!model.reference.frames) return { allOf: [referenceMode] };

  const frameMode: JsonSchema = {
    description: 'First/last-frame mode: exactly one first_frame image, at most one last_frame image, no reference images.',
    ...rolesOnly(['first_frame', 'last_frame', ...mediaRoles]),
    allOf: [roleCount('first_frame', 1, 1), roleCount('last_frame', 1), ...mediaCaps],
  };
  return { anyOf: [referenceMode, frameMode] };
}
