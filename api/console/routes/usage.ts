import type { FastifyInstance, FastifyRequest } from 'fastify';
import { GatewayError } from '../../../core/errors.ts';
import type { TaskDocument } from '../../../store/tasks.ts';
import { utcDay } from '../../../store/usage.ts';
import { openClip } from '../../services/task-clips.ts';
import { CONSOLE_CLIP_CACHING, clipRequestOf, sendClip } from '../../clip-reply.ts';
import { accountFrame, accountIdOf } from '../account-area.ts';
import { LATEST_TASKS_LIMIT, sendPage, type ConsoleContext } from '../context.ts';
import { parseQueryFields, usageQuery, type FormErrors } from '../forms.ts';
import { taskDetailPage, taskPagesAt, type TaskLinks } from '../views/tasks.ts';
import { usagePage } from '../views/usage.ts';

// Usage and spend per key over a chosen range of UTC days, and the video tasks behind them.

const DAY_MS = 86_400_000;
const DEFAULT_RANGE_DAYS = 30;
const MAX_RANGE_DAYS = 366;

const gatewayClipHref = (taskId: string) => `/console/tasks/${taskId}/clip`;

function daysBetween(fromDay: string, toDay: string): string[] {
  const days: string[] = [];
  for (let time = Date.parse(`${fromDay}T00:00:00Z`); time <= Date.parse(`${toDay}T00:00:00Z`); time += DAY_MS) {
    days.push(utcDay(new Date(time)));
  }
  return days;
}

/** The range asked for, or the last 30 days with the reason when it cannot be used. */
function chooseRange(from: string | undefined, to: string | undefined, now: Date): { fromDay: string; toDay: string; errors: FormErrors } {
  const toDay = to ?? utcDay(now);
  const fromDay = from ?? utcDay(new Date(Date.parse(`${toDay}T00:00:00Z`) - (DEFAULT_RANGE_DAYS - 1) * DAY_MS));
  if (fromDay > toDay) return { ...chooseRange(undefined, undefined, now), errors: { from: 'The range starts after it ends; showing the last 30 days.' } };
  // By arithmetic, not by listing the days: 0000-01-01 to 9999-12-31 is 3.6 million of them,
  // seconds of CPU in which the process serves nobody.
  const spanDays = (Date.parse(`${toDay}T00:00:00Z`) - Date.parse(`${fromDay}T00:00:00Z`)) / DAY_MS + 1;
  if (!(spanDays <= MAX_RANGE_DAYS)) {
    return { ...chooseRange(undefined, undefined, now), errors: { from: `Choose at most ${MAX_RANGE_DAYS} days; showing the last 30 days.` } };
  }
  return { fromDay, toDay, errors: {} };
}

export async function usageRoutes(app: FastifyInstance, { context }: { context: ConsoleContext }): Promise<void> {
  const { apiKeys, tasks, usageReports, publicBaseUrl } = context;

  /** The task the path names, when it is the signed-in account's. */
  async function ownTask(request: FastifyRequest): Promise<TaskDocument> {
    const task = await tasks.findForAccount((request.params as { taskId: string }).taskId, accountIdOf(request));
    if (!task) throw new GatewayError('task_not_found', 'There is no such task in your account.');
    return task;
  }

  app.get('/usage', async (request, reply) => {
    const accountId = accountIdOf(request);
    const { data: asked, errors: queryErrors } = parseQueryFields(usageQuery, request.query);
    // A date field cannot show a date that is not one: the message repeats what was typed.
    const typed = request.query as Record<string, unknown>;
    for (const field of ['from', 'to'] as const) {
      if (queryErrors[field] && typeof typed[field] === 'string') queryErrors[field] = `${queryErrors[field]} You typed “${typed[field]}”; the page shows its default date instead.`;
    }
    const range = chooseRange(asked.from, asked.to, new Date());
    const errors: FormErrors = { ...queryErrors, ...range.errors };
    const keys = await apiKeys.listForAccount(accountId);
    let selectedKeyId = asked.key ?? null;
    if (selectedKeyId && !keys.some((key) => key._id === selectedKeyId)) {
      errors.key = 'That key is not in your account; showing all keys.';
      selectedKeyId = null;
    }
    const period = { accountId, fromDay: range.fromDay, toDay: range.toDay };
    // A cursor that is no task of the account starts from the newest.
    const after = asked.tasks_after ? ((await tasks.findForAccount(asked.tasks_after, accountId)) ?? undefined) : undefined;
    const [usage, latestTasks] = await Promise.all([
      usageReports.summarise(period),
      // The tasks created in the days shown (the figures above count charges by the day they were
      // made, so a task created just before midnight and charged after it is listed on its own day).
      tasks.listLatest({ accountId, keyId: selectedKeyId ?? undefined, limit: LATEST_TASKS_LIMIT, createdFrom: new Date(`${range.fromDay}T00:00:00Z`), createdBefore: new Date(Date.parse(`${range.toDay}T00:00:00Z`) + DAY_MS), after }),
    ]);
    const taskPages = taskPagesAt('/console/usage', { from: asked.from, to: asked.to, key: selectedKeyId ?? undefined }, { ...latestTasks, isFirstPage: !after });
    const taskLinks: TaskLinks = { publicBaseUrl, gatewayClipHref, detailHref: (taskId) => `/console/tasks/${taskId}`, keyNames: new Map(keys.map((key) => [key._id, key.name])) };
    return sendPage(
      reply,
      usagePage(accountFrame(request, reply, 'usage'), {
        ...range,
        days: daysBetween(range.fromDay, range.toDay),
        keys,
        selectedKeyId,
        byKey: usage.byKey(),
        byDay: usage.byDay(selectedKeyId ?? undefined),
        tasks: latestTasks.tasks,
        taskPages,
        taskLinks,
        state: { errors },
      }),
    );
  });

  // The clip of a finished task, for a signed-in holder: the API's content address needs a
  // key, which a browser following the console's link does not send.
  app.get('/tasks/:taskId/clip', async (request, reply) => {
    const task = await ownTask(request);
    return sendClip(reply, await openClip(task, context.clipSources, clipRequestOf(request), `on its page, /console/tasks/${task._id}`), CONSOLE_CLIP_CACHING);
  });

  app.get('/tasks/:taskId', async (request, reply) => {
    const accountId = accountIdOf(request);
    const task = await ownTask(request);
    const keys = await apiKeys.listForAccount(accountId);
    const taskLinks: TaskLinks = { publicBaseUrl, gatewayClipHref, detailHref: null, keyNames: new Map(keys.map((key) => [key._id, key.name])) };
    return sendPage(reply, taskDetailPage(accountFrame(request, reply, 'usage'), task, taskLinks));
  });
}
