// Black bars around a centred picture or video, drawn only where it is not. Not a black
// rectangle under it: a fade sets the opacity of each child on its own, so a background under
// the content would dim the outgoing layer twice and the cross-fade would pass through dark.
import QtQuick

Item {
    // The content's rectangle in this item's coordinates.
    property rect inner

    anchors.fill: parent

    Rectangle { color: "black"; x: 0; y: 0; width: parent.width; height: inner.y }
    Rectangle {
        color: "black"
        x: 0
        y: inner.y + inner.height
        width: parent.width
        height: parent.height - y
    }
    Rectangle { color: "black"; x: 0; y: inner.y; width: inner.x; height: inner.height }
    Rectangle {
        color: "black"
        x: inner.x + inner.width
        y: inner.y
        width: parent.width - x
        height: inner.height
    }
}
