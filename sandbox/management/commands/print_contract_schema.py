"""Print the engine contract as JSON Schema: what a runner on another machine reads
(`ReviewJob`) and writes (`ReviewResult`), and what a model submits (`Submission`).

    python manage.py print_contract_schema [--only job|result|submission]
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from sandbox.contract import CONTRACT_VERSION, ReviewJob, ReviewResult, Submission

MODELS = {"job": ReviewJob, "result": ReviewResult, "submission": Submission}


class Command(BaseCommand):
    help = "Print the JSON Schema of ReviewJob, ReviewResult and Submission (the engine contract)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--only", choices=sorted(MODELS), help="Print one schema only.")

    def handle(self, *args, only: str | None = None, **options) -> None:
        if only:
            schema = MODELS[only].model_json_schema()
        else:
            schema = {
                "version": CONTRACT_VERSION,
                **{model.__name__: model.model_json_schema() for model in MODELS.values()},
            }
        self.stdout.write(json.dumps(schema, indent=2, sort_keys=True))
