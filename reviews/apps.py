from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    verbose_name = "Reviews"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate
        from django_q.signals import post_execute_in_worker, post_spawn, pre_execute

        from reviews import reaper, workers
        from reviews.dashboard.status import healthz, livez
        from reviews.schedules import schedules_after_migrate
        from tasuku.doors import door_register, view_door
        from tasuku.lifecycle import worker_lost

        # The health endpoints answer a probe that asks by address (a container's health
        # check asks 127.0.0.1, a load balancer the node's IP), whatever ALLOWED_HOSTS
        # says: they build nothing from the Host (tasuku/doors.py, `view_door`).
        door_register("GET", "/healthz", view_door(healthz))
        door_register("GET", "/livez", view_door(livez))

        # The periodic work is registered by every migrate (reviews/schedules.py).
        post_migrate.connect(schedules_after_migrate, sender=self, dispatch_uid="reviews.schedules")

        # Every worker process heartbeats, busy or idle (reviews/workers.py).
        post_spawn.connect(workers.heartbeat_start, dispatch_uid="reviews.heartbeat")
        pre_execute.connect(workers.task_started, dispatch_uid="reviews.heartbeat")
        post_execute_in_worker.connect(workers.task_finished, dispatch_uid="reviews.heartbeat")
        # Every worker process takes its turn at reaping (reviews/reaper.py), and a worker
        # process its cluster saw die has its runs handed on at once.
        post_spawn.connect(reaper.reaper_start, dispatch_uid="reviews.reaper")
        worker_lost.connect(reaper.worker_lost_release, dispatch_uid="reviews.reaper")
