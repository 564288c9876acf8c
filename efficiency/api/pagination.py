from django.utils.translation import gettext_lazy as _
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import PageNumberPagination


class PortalPagination(PageNumberPagination):
    """``?page=N&page_size=M`` on every list; at most 500 rows a page (a larger size is capped).

    A page size that is not a whole number above zero is a 400, not silently the default.
    """

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        value = request.query_params.get(self.page_size_query_param)
        if value is None:
            return self.page_size
        try:
            size = int(value)
        except ValueError:
            size = 0
        if size < 1:
            raise ValidationError({self.page_size_query_param: [_("Enter a whole number above zero.")]})
        return min(size, self.max_page_size)
