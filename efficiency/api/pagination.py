from rest_framework.pagination import PageNumberPagination


class PortalPagination(PageNumberPagination):
    """``?page=N&page_size=M`` on every list; at most 500 rows a page."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
