"""`conda ccm` (also `conda mcp` when no other plugin provides it): start the ccm MCP server
against the conda that runs this command."""

__version__ = "0.1.0"
