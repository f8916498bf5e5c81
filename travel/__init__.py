"""travel-collab: two LLM agents plan a TravelPlanner trip together (cooperative MARL + preference learning)."""
