"""The pure core: (matrix, request) → a Resolution that explains every choice, or a refusal naming
what blocks and the nearest stacks that would work. No IO here."""
