"""The review-pass REST API: thin views (views.py) over the pass services, and the
serializers that check what callers send (serializers.py)."""
