import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseMarkers, stripMarkers } from '../../simulator/markers.ts';

describe('simulator: prompt markers', () => {
  it('reads flags and valued markers anywhere in the text, several per bracket', () => {
    const markers = parseMarkers('a fox [sim:fail] runs [sim:delay=0.2] [sim:chunks=12 gap_ms=5] [sim:error=429 delay_ms=30] [sim:slow lose_answer]');
    assert.deepEqual(markers, { fail: true, reject: false, flaky: false, down: false, loseAnswer: true, slow: true, delaySeconds: 0.2, chunks: 12, gapMs: 5, errorStatus: 429, delayMs: 30 });
  });

  it('ignores malformed values and unknown names instead of failing', () => {
    const markers = parseMarkers('[sim:delay=soon] [sim:error=200] [sim:error=abc] [sim:chunks=0] [sim:teleport] [sim:delay=-1] [not:fail]');
    assert.deepEqual(markers, { fail: false, reject: false, flaky: false, down: false, loseAnswer: false, slow: false });
  });

  it('accepts zero delays', () => {
    assert.equal(parseMarkers('[sim:delay=0]').delaySeconds, 0);
    assert.equal(parseMarkers('[sim:delay_ms=0]').delayMs, 0);
    assert.deepEqual([parseMarkers('[sim:image_kib=512]').imageKib, parseMarkers('[sim:image_kib=99999999]').imageKib, parseMarkers('[sim:image_kib=1.5]').imageKib], [512, 65_536, undefined]);
  });

  it('reads break_after, zero included, and ignores a count that is no integer', () => {
    assert.deepEqual([parseMarkers('[sim:break_after=3]').breakAfter, parseMarkers('[sim:break_after=0]').breakAfter, parseMarkers('[sim:break_after=1.5]').breakAfter], [3, 0, undefined]);
  });

  it('strips markers from text for echoing', () => {
    assert.equal(stripMarkers('hello [sim:slow] there  [sim:chunks=3 gap_ms=1]'), 'hello there');
  });
});
