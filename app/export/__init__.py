"""The self-contained HTML export: one offline ``.html`` file per report or comparison,
built from the dashboard's own views and figure builders."""
