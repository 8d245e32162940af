from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Reviews"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate
        from django_q.signals import post_execute_in_worker, post_spawn, pre_execute

        from reviews import tasks
        from reviews.dashboard.status import healthz, livez
        from reviews.queue import reaper, workers
        from reviews.queue.schedules import schedules_after_migrate
        from tasuku.doors import door_register, view_door
        from tasuku.lifecycle import worker_lost

        # The health endpoints answer a probe that asks by address (a container's health
        # check asks 127.0.0.1, a load balancer the node's IP), whatever ALLOWED_HOSTS
        # says: they build nothing from the Host (tasuku/doors.py, `view_door`).
        door_register("GET", "/healthz", view_door(healthz))
        door_register("GET", "/livez", view_door(livez))

        _handlers_register()

        # The periodic work is registered by every migrate (reviews/queue/schedules.py).
        post_migrate.connect(
            schedules_after_migrate, sender=self, dispatch_uid="reviews.queue.schedules"
        )

        # Every worker process heartbeats, busy or idle (reviews/queue/workers.py).
        post_spawn.connect(workers.heartbeat_start, dispatch_uid="reviews.queue.heartbeat")
        pre_execute.connect(workers.task_started, dispatch_uid="reviews.queue.heartbeat")
        post_execute_in_worker.connect(
            workers.task_finished, dispatch_uid="reviews.queue.heartbeat"
        )
        # Every worker process takes its turn at reaping (reviews/queue/reaper.py), and a worker
        # process its cluster saw die has its runs handed on at once.
        reaper.sweep_register(tasks.runs_reap)
        post_spawn.connect(reaper.reaper_start, dispatch_uid="reviews.queue.reaper")
        worker_lost.connect(reaper.worker_lost_release, dispatch_uid="reviews.queue.reaper")


def _handlers_register() -> None:
    """What the features plug into the core with: the deliveries this app handles
    (webhooks/routing.py), each event's handlers in the order they run; the work a
    delivery may start at once; the runners that review elsewhere."""
    from repos.policy import Runner
    from reviews.actions import workflow
    from reviews.conversation import replies
    from reviews.engines.boundary import dispatcher_register
    from reviews.intake import merge_queue, pull_requests, triggers
    from reviews.passes import events as passes
    from reviews.publication import fixes
    from reviews.queue.runs import PROCESS_TASK
    from webhooks.routing import follow_up_register, register

    register("pull_request", pull_requests.pull_request_event, fixes.pull_request_event)
    register("issue_comment", triggers.issue_comment_event, passes.issue_comment_event)
    register("check_run", passes.check_run_event, triggers.check_run_event)
    register("check_suite", passes.check_suite_event, triggers.check_suite_event)
    register("status", passes.status_event)
    register("pull_request_review_comment", replies.review_comment_event,
             passes.review_comment_event)  # fmt: skip
    register("pull_request_review", passes.pull_request_review_event)
    register("pull_request_review_thread", replies.thread_event)
    register("workflow_run", workflow.workflow_run_event)
    register("merge_group", merge_queue.merge_group_event)
    # A delivery that queued a review may have its worker start it at once (webhooks/tasks.py).
    follow_up_register(PROCESS_TASK, _run_now)
    # Reviews on GitHub Actions: the pipeline hands the job to its dispatcher (reviews/engines/boundary.py).
    dispatcher_register(Runner.ACTIONS, workflow.review_dispatch)


def _run_now(run_pk: int) -> object:
    """The review run a delivery queued, started in the delivery's worker (the task its
    doorbell rings: imported on first use, so that a web process never loads it)."""
    from reviews.tasks import run_process

    return run_process(run_pk)
