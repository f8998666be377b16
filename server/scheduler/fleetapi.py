"""The scheduler's extension API for running a fleet (docs/interface.md, "Extensions").

PUT    /x/schedules/<id>                 a CDS (text/xml): 201 new, 204 replaced, 400 with the line,
                                         409 when the id is a playlist's
DELETE /x/schedules/<id>                 204, or 404 (409: a playlist's)
GET    /x/assignments                    [{"schedule", "display" | "group"}]
POST   /x/assignments                    {"schedule", "display" | "group"}: 201 new, 200 existed
DELETE /x/assignments                    the same body: 200, or 404 not-assigned
GET    /x/groups                         [{"name", "displays": [url]}]
POST   /x/groups/<name>/displays         {"display": url}: 201 new, 200 existed
DELETE /x/groups/<name>/displays         {"display": url}: 200, or 404 not-in-group
GET    /x/displays/schedules?display=URL the display's schedules and groups, what was pushed
"""

from __future__ import annotations

import re
from typing import Any

from flask import Flask, Response, request

from server.platform.http import ApiError, body_kind, json_response, read_json_object, read_xml_body
from server.platform.validation import HTTP, Field, Schema, Uri, ValidationError, invalid_field
from server.scheduler.fleet import Fleet
from server.scheduler.schedules import ScheduleLibrary, is_schedule_id
from server.scheduler.storage import Assignment, ScheduleConflictError, SchedulerStorage

GROUP_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,199}$")
GROUP_NAME_TEXT = "1 to 200 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
MAX_GROUPS = 32


def group_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not GROUP_NAME.match(value):
        raise invalid_field(name, f"'{name}' must be a group name: {GROUP_NAME_TEXT}.")
    return value


def group_list(name: str, value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_GROUPS:
        raise invalid_field(name, f"'{name}' must be a list of at most {MAX_GROUPS} group names.")
    return sorted({group_name(name, item) for item in value})


def schedule_id_field(name: str, value: Any) -> str:
    if not isinstance(value, str) or not is_schedule_id(value):
        raise invalid_field(name, f"'{name}' must be a schedule id.")
    return value


def playlist_conflict(conflict: ScheduleConflictError) -> ApiError:
    """409: a playlist's schedule id used for a hand-written schedule, or the other way."""
    if conflict.is_playlist:
        message = (
            f"'{conflict.schedule_id}' is a playlist's schedule: change it with"
            f" PUT /x/playlists/{conflict.schedule_id}, or pick another id."
        )
    else:
        message = (
            f"'{conflict.schedule_id}' is a hand-written schedule: delete it with"
            f" DELETE /x/schedules/{conflict.schedule_id} first, or pick another id."
        )
    return ApiError(409, "schedule-conflict", message)


ASSIGNMENT = Schema(
    Field("schedule", schedule_id_field, required=True),
    Field("display", Uri(schemes=HTTP)),
    Field("group", group_name),
)
MEMBER = Schema(Field("display", Uri(schemes=HTTP), required=True))


def add_fleet_routes(
    app: Flask, storage: SchedulerStorage, library: ScheduleLibrary, fleet: Fleet
) -> None:
    def registered(url: str) -> str:
        display = storage.display(url)
        if display is None:
            raise ApiError(
                404,
                "unknown-display",
                f"No display {url} is registered here (it registers itself with POST /displays).",
                field="display",
            )
        return display.url

    def assignment_from_body() -> Assignment:
        fields = ASSIGNMENT.validate(read_json_object())
        if ("display" in fields) == ("group" in fields):
            raise ValidationError(
                400, "invalid-field", "Give either 'display' or 'group', not both.", field="group"
            )
        return Assignment(
            schedule_id=fields["schedule"],
            display=registered(fields["display"]) if "display" in fields else None,
            group=fields.get("group"),
        )

    @app.put("/x/schedules/<id>")
    def put_schedule(id: str) -> Response:
        if not is_schedule_id(id):
            raise ApiError(
                400,
                "invalid-schedule-id",
                "A schedule id is 1 to 200 letters, digits, '.', '_' or '-', "
                "not starting with '.' or '-'.",
            )
        if body_kind() != "xml":
            raise ApiError(
                415, "unsupported-media-type", "Send the schedule as a CDS, Content-Type text/xml."
            )
        data = read_xml_body()
        try:
            created = library.put(id, data)  # invalid: 400 invalid-cds (server.platform.http)
        except ScheduleConflictError as conflict:
            raise playlist_conflict(conflict) from None
        if created:
            response = json_response({}, 201)
            response.headers["Location"] = f"/schedule/{id}/"
            return response
        return Response(status=204)

    @app.delete("/x/schedules/<id>")
    def delete_schedule(id: str) -> Response:
        try:
            deleted = is_schedule_id(id) and library.delete(id)
        except ScheduleConflictError as conflict:
            raise playlist_conflict(conflict) from None
        if not deleted:
            raise ApiError(404, "unknown-schedule", f"There is no schedule '{id}'.")
        return Response(status=204)

    @app.get("/x/assignments")
    def list_assignments() -> Response:
        return json_response([_assignment_json(a) for a in storage.assignments()])

    @app.post("/x/assignments")
    def assign() -> Response:
        assignment = assignment_from_body()
        if library.get(assignment.schedule_id) is None:
            raise ApiError(
                404,
                "unknown-schedule",
                f"There is no schedule '{assignment.schedule_id}'.",
                field="schedule",
            )
        created = fleet.assign(assignment)
        return json_response(_assignment_json(assignment), 201 if created else 200)

    @app.delete("/x/assignments")
    def unassign() -> Response:
        assignment = assignment_from_body()
        if not fleet.unassign(assignment):
            raise ApiError(404, "not-assigned", "There is no such assignment.")
        return json_response(_assignment_json(assignment), 200)

    @app.get("/x/groups")
    def list_groups() -> Response:
        return json_response(
            [{"name": name, "displays": urls} for name, urls in storage.groups().items()]
        )

    @app.post("/x/groups/<name>/displays")
    def add_member(name: str) -> Response:
        group = group_name("name", name)
        url = registered(MEMBER.validate(read_json_object())["display"])
        created = fleet.add_to_group(url, group)
        return json_response({"group": group, "display": url}, 201 if created else 200)

    @app.delete("/x/groups/<name>/displays")
    def remove_member(name: str) -> Response:
        group = group_name("name", name)
        url = registered(MEMBER.validate(read_json_object())["display"])
        if not fleet.remove_from_group(url, group):
            raise ApiError(404, "not-in-group", f"{url} is not in the group '{group}'.")
        return json_response({"group": group, "display": url}, 200)

    @app.get("/x/displays/schedules")
    def display_schedules() -> Response:
        given = request.args.get("display")
        if not given:
            raise ApiError(400, "invalid-field", "'display' is required.", field="display")
        url = registered(Uri(schemes=HTTP)("display", given))
        return json_response(
            {
                "display": url,
                "groups": storage.display_groups(url),
                "schedules": storage.schedules_for(url),
                "documents": [document.name for document in fleet.documents_for(url)],
                "pushed": sorted(name for name, digest in storage.pushed(url).items() if digest),
            }
        )


def _assignment_json(assignment: Assignment) -> dict[str, Any]:
    body: dict[str, Any] = {"schedule": assignment.schedule_id}
    if assignment.display is not None:
        body["display"] = assignment.display
    if assignment.group is not None:
        body["group"] = assignment.group
    return body
